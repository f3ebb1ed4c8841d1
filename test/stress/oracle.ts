/**
 * What the daemon must answer to any bytes a client sends, from the JSON-RPC 2.0 rules and
 * SPEC §4 alone: one answer per request with an id (none for a notification), an array for a
 * batch, -32700 for what is not JSON, -32600 for what is not a request, -32601 for an unknown
 * method, -32602 for params that fail the schema, -32004 for the admin scope "*" without its
 * token, and a close after an over-size frame.
 * Answers are compared as multisets of `id|outcome` signatures, since a connection's answers
 * may come in any order.
 */

import { PROCESS_ACTIONS as ALL_PROCESS_ACTIONS, ProcessParamsSchema } from '../../src/schema/process.js';

export const PARSE = -32700;
export const INVALID_REQUEST = -32600;
export const NO_METHOD = -32601;
export const INVALID_PARAMS = -32602;
export const NOT_FOUND = -32001;
export const FORBIDDEN = -32004;

/** A result, by what it is the result of; or an error code. */
export type Outcome = 'ok:status' | 'ok:tools' | 'ok:list' | 'ok:cancel' | number;

/** SPEC §4's bounds: requests per batch, and levels of nesting in params. */
const MAX_BATCH = 100;
const MAX_DEPTH = 64;

/** Objects and arrays nested more than `max` levels below `v` (params itself is level 0). */
function deeperThan(v: unknown, max: number): boolean {
  let level: unknown[] = [v];
  for (let depth = 0; level.length > 0; depth++) {
    const next: unknown[] = [];
    for (const x of level) if (typeof x === 'object' && x !== null) next.push(...(Array.isArray(x) ? x : Object.values(x)));
    if (next.some((x) => typeof x === 'object' && x !== null) && depth + 1 >= max) return true;
    level = next;
  }
  return false;
}

export const KNOWN_METHODS = new Set(['exec', 'process', 'tool', 'tools.list', 'subscribe', 'unsubscribe', 'checkpoint', 'daemon.status', 'approvals.list', 'rules.list', 'rules.remove', 'policy.check', 'audit.verify', 'history', '$/cancelRequest']);
// Every action the process tool has (SPEC §6 and the sections that add actions): an unknown one is invalid.
const PROCESS_ACTIONS: readonly string[] = ALL_PROCESS_ACTIONS;
// The process tool's params as its schema names them: any other key is invalid.
const PROCESS_KEYS = new Set(Object.keys(ProcessParamsSchema.shape));
/** The process params the generator may send; any other schema key is a generator bug. */
const GENERATED_PROCESS_KEYS = new Set(['action', 'sessionId', 'timeout', 'offset', 'limit']);
const SCOPE = /^[A-Za-z0-9_.:@-]{1,128}$/;
/** Object.prototype member names: ordinary names wherever a name goes (scopes, ids, methods, keys). */
export const PROTO_NAMES = ['__proto__', 'constructor', 'toString', 'valueOf', 'hasOwnProperty', 'isPrototypeOf', 'propertyIsEnumerable', 'toLocaleString', '__defineGetter__', '__lookupSetter__'];

/** A frame the oracle cannot judge exactly; the generator drops it. */
export class Unpredictable extends Error {}

/** A frame that could run a command; never sent. */
export class WouldRun extends Error {}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isId = (v: unknown) => typeof v === 'string' || (typeof v === 'number' && Number.isFinite(v)) || v === null;
export const sig = (id: unknown, outcome: Outcome) => `${JSON.stringify(id)}|${outcome}`;

function scopeOutcome(params: Record<string, unknown>): Outcome | undefined {
  if (!('scope' in params)) return undefined;
  const scope = params.scope;
  // "*" is every scope, for the adminToken only (SPEC §8); this daemon has none.
  if (scope === '*') return FORBIDDEN;
  return typeof scope === 'string' && SCOPE.test(scope) ? undefined : INVALID_PARAMS;
}

function withoutScope(params: Record<string, unknown>): Record<string, unknown> {
  const { scope: _scope, token: _token, ...rest } = params;
  return rest;
}

function processOutcome(p: Record<string, unknown>): Outcome {
  for (const k of Object.keys(p)) {
    if (!PROCESS_KEYS.has(k)) return INVALID_PARAMS;
    if (!GENERATED_PROCESS_KEYS.has(k)) throw new Unpredictable(`process param ${k}`);
  }
  const { action, sessionId, timeout, offset, limit } = p;
  if (typeof action === 'string' && PROCESS_ACTIONS.includes(action) && !['list', 'poll', 'log'].includes(action)) {
    throw new Unpredictable(`process action ${action}`);
  }
  if (action !== 'list' && action !== 'poll' && action !== 'log') return INVALID_PARAMS;
  const natural = (v: unknown) => v === undefined || (typeof v === 'number' && Number.isSafeInteger(v) && v >= 0);
  if (sessionId !== undefined && (typeof sessionId !== 'string' || sessionId.length === 0)) return INVALID_PARAMS;
  if (timeout !== undefined && (typeof timeout !== 'number' || timeout < 0)) return INVALID_PARAMS;
  if (!natural(offset) || !natural(limit)) return INVALID_PARAMS;
  if (action === 'list') return 'ok:list';
  // Fuzzed scopes hold no sessions, so any session id is unknown.
  return sessionId === undefined ? INVALID_PARAMS : NOT_FOUND;
}

/**
 * Exec is fuzzed only with params that cannot run: a command that is a non-empty string would be
 * run by a shell, so such a frame is refused here, before anything is sent.
 */
function execOutcome(p: Record<string, unknown>): Outcome {
  if (typeof p.command === 'string' && p.command.length > 0) throw new WouldRun(`an exec that could run: ${JSON.stringify(p).slice(0, 200)}`);
  return INVALID_PARAMS;
}

/** The outcome of a well-formed request to a known method (before knowing whether it has an id). */
function callOutcome(method: string, params: unknown): Outcome {
  if (Array.isArray(params)) {
    // Positional params are refused before the method runs.
    return INVALID_PARAMS;
  }
  const p = (params ?? {}) as Record<string, unknown>;
  switch (method) {
    case 'daemon.status':
      return 'ok:status';
    case 'tools.list':
      return 'ok:tools';
    case '$/cancelRequest':
      return 'ok:cancel';
    case 'unsubscribe':
      return INVALID_PARAMS;
    case 'exec': {
      const bad = scopeOutcome(p);
      const outcome = execOutcome(withoutScope(p));
      return bad ?? outcome;
    }
    case 'process':
      return scopeOutcome(p) ?? processOutcome(withoutScope(p));
    case 'history':
    case 'audit.verify': {
      // Who asks is judged first; then a strict schema: any key it lacks is refused (the generator sends one always).
      const rest = withoutScope(p);
      if (Object.keys(rest).length === 0) throw new Unpredictable(`${method} with no params`);
      return scopeOutcome(p) ?? INVALID_PARAMS;
    }
    case 'tool': {
      const bad = scopeOutcome(p);
      const { tool, ...rest } = withoutScope(p);
      const outcome = tool === 'exec' ? execOutcome(rest) : tool === 'process' ? processOutcome(rest) : INVALID_PARAMS;
      return bad ?? outcome;
    }
    default:
      throw new Unpredictable(`method ${method}`);
  }
}

/** The signature of the one answer a request object gets, or undefined for a notification. */
export function expectRequest(req: unknown): string | undefined {
  if (!isObject(req)) return sig(null, INVALID_REQUEST);
  const hasId = 'id' in req;
  const id = hasId && isId(req.id) ? req.id : null;
  if (req.jsonrpc !== '2.0' || typeof req.method !== 'string' || (hasId && !isId(req.id))) return sig(id, INVALID_REQUEST);
  if (req.params !== undefined && typeof req.params !== 'object') return sig(id, INVALID_REQUEST);
  if (req.params === null) return sig(id, INVALID_REQUEST);
  if (req.method === '$/cancelRequest') return hasId ? sig(id, 'ok:cancel') : undefined;
  if (!KNOWN_METHODS.has(req.method)) return hasId ? sig(id, NO_METHOD) : undefined;
  // Computed for notifications too: the exec guard must see every frame that reaches a method.
  const outcome = callOutcome(req.method, req.params);
  // SPEC §4: nesting in params is bounded (64 levels), answered as invalid params.
  if (!Array.isArray(req.params) && deeperThan(req.params, MAX_DEPTH)) return hasId ? sig(id, INVALID_PARAMS) : undefined;
  return hasId ? sig(id, outcome) : undefined;
}

export interface LineAnswer {
  single?: string;
  batch?: string;
}

export const batchSig = (sigs: string[]) => JSON.stringify([...sigs].sort());

/** What one line (without its newline) must be answered with; undefined for no answer. */
export function expectLine(bytes: Buffer): LineAnswer | undefined {
  const line = bytes.toString('utf8').replace(/\r$/, '');
  if (line.trim() === '') {
    // Lines of only Unicode spaces: skipped as blank by the daemon, but not JSON whitespace.
    if (line.replace(/[ \t\r\n]/g, '') !== '') throw new Unpredictable('a line of Unicode spaces');
    return undefined;
  }
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return { single: sig(null, PARSE) };
  }
  if (!Array.isArray(value)) {
    const s = expectRequest(value);
    return s === undefined ? undefined : { single: s };
  }
  if (value.length === 0) return { single: sig(null, INVALID_REQUEST) };
  const sigs = value.map(expectRequest).filter((s): s is string => s !== undefined);
  // SPEC §4: a batch of more than 100 requests is refused whole.
  if (value.length > MAX_BATCH) return { single: sig(null, INVALID_REQUEST) };
  return sigs.length ? { batch: batchSig(sigs) } : undefined;
}

/** A multiset of signatures, with a sample of what produced each (for failure messages). */
export class Tally {
  readonly counts = new Map<string, number>();
  readonly samples = new Map<string, string>();
  total = 0;

  add(s: string, sample = ''): void {
    this.counts.set(s, (this.counts.get(s) ?? 0) + 1);
    if (!this.samples.has(s)) this.samples.set(s, sample);
    this.total++;
  }

  /** Every signature whose count differs: expected vs got. */
  diff(got: Tally): string[] {
    const out: string[] = [];
    for (const k of new Set([...this.counts.keys(), ...got.counts.keys()])) {
      const want = this.counts.get(k) ?? 0;
      const have = got.counts.get(k) ?? 0;
      if (want !== have) {
        const sample = this.samples.get(k) ?? got.samples.get(k) ?? '';
        out.push(`${k.slice(0, 160)}: expected ${want}, got ${have}; e.g. ${JSON.stringify(sample.slice(0, 300))}`);
      }
    }
    return out;
  }
}

export interface StreamExpectation {
  singles: Tally;
  batches: Tally;
  /** The connection is closed after an over-size frame. */
  closes: boolean;
  /** Bytes of the stream the daemon reads before it stops (all of it unless over-size). */
  answeredUpTo: number;
}

/** Expected answers for a whole byte stream sent on one connection (frames split into lines on \n). */
export function expectStream(data: Buffer, maxFrame: number): StreamExpectation {
  const singles = new Tally();
  const batches = new Tally();
  let start = 0;
  for (;;) {
    const nl = data.indexOf(10, start);
    const end = nl === -1 ? data.length : nl;
    if (end - start > maxFrame) {
      singles.add(sig(null, INVALID_REQUEST), 'over-size frame');
      return { singles, batches, closes: true, answeredUpTo: start };
    }
    if (nl === -1) return { singles, batches, closes: false, answeredUpTo: data.length };
    const line = data.subarray(start, nl);
    const a = expectLine(line);
    if (a?.single) singles.add(a.single, line.toString('utf8'));
    if (a?.batch) batches.add(a.batch, line.toString('utf8'));
    start = nl + 1;
  }
}

/** Why an answer object is not a well-formed JSON-RPC response, or undefined. */
export function malformed(a: unknown): string | undefined {
  if (!isObject(a)) return 'not an object';
  for (const k of Object.keys(a)) if (!['jsonrpc', 'id', 'result', 'error'].includes(k)) return `unexpected member ${k}`;
  if (a.jsonrpc !== '2.0') return 'jsonrpc is not "2.0"';
  if (!('id' in a) || !isId(a.id)) return 'no valid id';
  if (('result' in a) === ('error' in a)) return 'not exactly one of result and error';
  if ('error' in a) {
    const e = a.error;
    if (!isObject(e) || !Number.isInteger(e.code) || typeof e.message !== 'string' || e.message === '') return 'a malformed error';
    const data = e.data as Record<string, unknown> | undefined;
    if (e.code === INVALID_PARAMS && (data?.kind !== 'invalid' || !Array.isArray(data.path))) return '-32602 without data.kind "invalid" and a path';
    if (e.code === NOT_FOUND && data?.kind !== 'not_found') return '-32001 without data.kind "not_found"';
    if (e.code === FORBIDDEN && data?.kind !== 'forbidden') return '-32004 without data.kind "forbidden"';
  }
  return undefined;
}

function resultKind(r: unknown): string {
  if (Array.isArray(r)) return r.length === 2 && r.every((t) => isObject(t) && typeof t.name === 'string' && isObject(t.inputSchema)) ? 'ok:tools' : 'ok:?';
  if (!isObject(r)) return 'ok:?';
  if (typeof r.pid === 'number' && typeof r.version === 'string') return 'ok:status';
  if (Array.isArray(r.sessions)) return r.sessions.length === 0 ? 'ok:list' : 'ok:list-not-empty';
  return Object.keys(r).length === 0 ? 'ok:cancel' : 'ok:?';
}

/** The signature of one received answer (validated first; a problem makes it a signature of its own). */
export function answerSig(a: unknown): string {
  const problem = malformed(a);
  if (problem) return `MALFORMED(${problem}): ${JSON.stringify(a).slice(0, 200)}`;
  const r = a as { id: unknown; result?: unknown; error?: { code: number } };
  return `${JSON.stringify(r.id)}|${r.error ? r.error.code : resultKind(r.result)}`;
}

/** Sort received answers (single objects and batch arrays) into tallies. */
export function tallyAnswers(answers: unknown[]): { singles: Tally; batches: Tally } {
  const singles = new Tally();
  const batches = new Tally();
  for (const a of answers) {
    if (Array.isArray(a)) batches.add(a.length === 0 ? 'MALFORMED(an empty batch answer)' : batchSig(a.map(answerSig)), JSON.stringify(a).slice(0, 300));
    else singles.add(answerSig(a), JSON.stringify(a).slice(0, 300));
  }
  return { singles, batches };
}
