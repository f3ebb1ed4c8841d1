import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ExecParamsSchema, MAX_TIMEOUT_SEC } from '../../../src/schema/exec.js';
import { quickExecParams } from '../../../src/tools/exec.js';
import { agreesWithSchema } from '../support/quick-params.js';

/** A value for one of the fields the quick check knows, or one it does not, of any type. */
const anyValue = fc.oneof(
  fc.string(),
  fc.constantFrom('', 'ls', 'pipe', 'null', 'x'.repeat(200), 'x'.repeat(201), '/tmp'),
  fc.integer({ min: -5, max: 5 }),
  fc.constantFrom(0, -0, 1.5, -1, MAX_TIMEOUT_SEC, MAX_TIMEOUT_SEC + 1, 2 ** 53, Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 1e308),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 2 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 }),
);
const keys = fc.constantFrom('command', 'workdir', 'yieldMs', 'background', 'timeout', 'pty', 'stdin', 'name', 'key', 'elevated', 'env', 'shell', 'yieldOnQuietMs', 'constructor', '__proto__');

describe("the quick check of an exec's params", () => {
  it('takes only what the schema takes, and gives what the schema gives, as a copy', () => {
    fc.assert(
      fc.property(fc.oneof(fc.constantFrom('true', 'ls -la', ''), fc.string()), fc.array(fc.tuple(keys, anyValue), { maxLength: 6 }), (command, fields) => {
        const raw: Record<string, unknown> = JSON.parse(JSON.stringify({ command }));
        for (const [k, v] of fields) Object.defineProperty(raw, k, { value: v, enumerable: true, writable: true, configurable: true });
        const quick = agreesWithSchema(quickExecParams, ExecParamsSchema, raw);
        if (quick !== undefined) expect(quick).not.toBe(raw);
      }),
      { numRuns: 5000 },
    );
  });

  it('passes the usual shapes of an exec, and leaves the rest to the schema', () => {
    for (const raw of [{ command: 'true' }, { command: 'npm test', workdir: '/tmp', yieldMs: 10_000 }, { command: 'sleep 9', background: true, timeout: 60, name: 'nap' }, { command: 'cat', stdin: 'null', pty: false }]) {
      expect(quickExecParams(raw)).toEqual(ExecParamsSchema.parse(raw));
    }
    expect(quickExecParams({ command: 'true', env: { A: 'b' } })).toBeUndefined();
    expect(quickExecParams({ command: 'true', extra: 1 })).toBeUndefined();
    expect(quickExecParams({ command: '' })).toBeUndefined();
  });
});
