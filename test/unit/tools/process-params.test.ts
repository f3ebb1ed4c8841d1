import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProcessParamsSchema } from '../../../src/schema/process.js';
import { quickParams } from '../../../src/tools/process/index.js';
import { agreesWithSchema } from '../support/quick-params.js';

/** A value for one of the fields the quick check knows, or one it does not, of any type. */
const anyValue = fc.oneof(
  fc.string(),
  fc.constantFrom('', 'abc', 'poll', 'list', 'log'),
  fc.integer({ min: -5, max: 5 }),
  fc.constantFrom(0, -0, 1.5, -1, 2 ** 53, 2 ** 53 - 1, Number.NaN, Number.POSITIVE_INFINITY, 1e308),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 2 }),
  fc.dictionary(fc.string(), fc.integer(), { maxKeys: 2 }),
);
const keys = fc.constantFrom('action', 'sessionId', 'offset', 'limit', 'timeout', 'all', 'data', 'mode', 'constructor', '__proto__');

describe('the quick check of a poll\'s or a list\'s params', () => {
  it('takes only what the schema takes, and gives what the schema gives', () => {
    fc.assert(
      fc.property(fc.constantFrom('poll', 'list', 'log', 'kill', 'nope'), fc.array(fc.tuple(keys, anyValue), { maxLength: 5 }), (action, fields) => {
        const raw: Record<string, unknown> = JSON.parse(JSON.stringify({ action }));
        for (const [k, v] of fields) Object.defineProperty(raw, k, { value: v, enumerable: true, writable: true, configurable: true });
        agreesWithSchema(quickParams, ProcessParamsSchema, raw);
      }),
      { numRuns: 5000 },
    );
  });

  it('passes the usual shapes of a poll and a list', () => {
    for (const raw of [{ action: 'poll', sessionId: 'ab12cd34' }, { action: 'poll', sessionId: 'x', timeout: 1500 }, { action: 'list' }, { action: 'list', limit: 50, offset: 100 }]) {
      expect(quickParams(raw)).toEqual(ProcessParamsSchema.parse(raw));
    }
    expect(quickParams({ action: 'poll', sessionId: 'x', extra: 1 })).toBeUndefined();
    expect(quickParams({ action: 'list', limit: 1.5 })).toBeUndefined();
  });
});
