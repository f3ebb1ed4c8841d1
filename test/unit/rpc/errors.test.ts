import { describe, expect, it } from 'vitest';
import { ProcctlError, conflict, forbidden, invalid, limit, notFound, unavailable, type ErrorKind } from '../../../src/base/errors.js';
import { INTERNAL_ERROR, INVALID_PARAMS, KIND_CODES, toRpcError } from '../../../src/rpc/errors.js';
import { ExecParamsSchema } from '../../../src/schema/exec.js';
import { parseParams } from '../../../src/schema/parse.js';

describe('toRpcError', () => {
  it.each([
    ['not_found', notFound, -32001],
    ['conflict', conflict, -32002],
    ['invalid', invalid, -32003],
    ['forbidden', forbidden, -32004],
    ['limit', limit, -32005],
    ['unavailable', unavailable, -32006],
  ] as const)('maps kind %s to %d with data.kind', (kind, make, code) => {
    const r = toRpcError(make('something a person can act on', { sessionId: 'abc' }));
    expect(r).toEqual({ code, message: 'something a person can act on', data: { kind, sessionId: 'abc' } });
  });

  it('keeps every application code inside -32000..-32099 and distinct', () => {
    const codes = Object.values(KIND_CODES);
    expect(new Set(codes).size).toBe(codes.length);
    for (const c of codes) {
      expect(c).toBeLessThanOrEqual(-32000);
      expect(c).toBeGreaterThanOrEqual(-32099);
    }
    expect(Object.keys(KIND_CODES).sort()).toEqual(['conflict', 'forbidden', 'invalid', 'limit', 'not_found', 'restarting', 'unavailable']);
  });

  it('gives a kind without details just data.kind', () => {
    expect(toRpcError(new ProcctlError('conflict', 'busy'))).toEqual({ code: -32002, message: 'busy', data: { kind: 'conflict' } });
  });

  it('maps schema failures to -32602 invalid params, with the path and without the internal marker', () => {
    let err: unknown;
    try {
      parseParams(ExecParamsSchema, { command: 'ls', bogus: 1 }, 'exec');
    } catch (e) {
      err = e;
    }
    const r = toRpcError(err);
    expect(r.code).toBe(INVALID_PARAMS);
    expect(r.code).toBe(-32602);
    expect(r.data).toEqual({ kind: 'invalid', path: ['bogus'] });
    expect(r.message).toContain('bogus');
  });

  it('maps an invalid error that is not a schema failure to the application code', () => {
    expect(toRpcError(invalid('workdir /nope does not exist', { path: ['workdir'] })).code).toBe(-32003);
  });

  it.each([
    [new Error('boom'), 'internal error: boom'],
    [new TypeError('x is undefined'), 'internal error: x is undefined'],
    ['a string', 'internal error: a string'],
    [undefined, 'internal error: undefined'],
  ])('maps anything else (%j) to -32603 without data', (thrown, message) => {
    expect(toRpcError(thrown)).toEqual({ code: INTERNAL_ERROR, message });
    expect(INTERNAL_ERROR).toBe(-32603);
  });

  it('covers every kind', () => {
    const kinds: ErrorKind[] = ['not_found', 'conflict', 'invalid', 'forbidden', 'limit', 'unavailable'];
    for (const kind of kinds) expect(toRpcError(new ProcctlError(kind, 'm')).data).toEqual({ kind });
  });
});
