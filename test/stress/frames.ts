import fc from 'fast-check';
import { ExecParamsSchema } from '../../src/schema/exec.js';
import { PROCESS_ACTIONS, ProcessParamsSchema } from '../../src/schema/process.js';
import { HistoryParamsSchema } from '../../src/schema/history.js';
import { expectLine, KNOWN_METHODS, PROTO_NAMES, Tally, Unpredictable, WouldRun, type LineAnswer } from './oracle.js';

/**
 * Generated traffic for the protocol fuzz: JSON-RPC requests (valid and broken), batches, raw
 * bytes, broken UTF-8 and stray newlines. Methods are only harmless ones: `process`
 * list/poll/log in scopes that hold no session, `tools.list`, `daemon.status`, unknown methods,
 * and `exec`/`tool` with params that fail the schema twice over (a command that is not a
 * string and an unknown key), so no single corruption can make one runnable.
 */

const PROCESS_SCHEMA_KEYS = Object.keys(ProcessParamsSchema.shape);
const EXEC_SCHEMA_KEYS = Object.keys(ExecParamsSchema.shape);
const RESERVED = new Set([...PROCESS_SCHEMA_KEYS, ...EXEC_SCHEMA_KEYS, 'scope', 'token', 'tool']);

/** Invalid UTF-8: stray continuation, overlong, surrogate, past U+10FFFF, truncated sequences, 0xFF. */
const BROKEN_UTF8 = [[0x80], [0xbf, 0x80], [0xc0, 0xaf], [0xc3], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf0, 0x9f, 0x98], [0xf4, 0x90, 0x80, 0x80], [0xff], [0xfe, 0xff], [0xf8, 0x88, 0x80, 0x80, 0x80]];

export const hugeString = fc
  .record({ ch: fc.constantFrom('x', 'é', '€', '😀', '"', '\\', '\n', '\u0001', '\u2028'), n: fc.integer({ min: 1_000, max: 20_000 }) })
  .map(({ ch, n }) => ch.repeat(n));

export const weirdString = fc.oneof(
  { weight: 8, arbitrary: fc.string({ maxLength: 40 }) },
  { weight: 3, arbitrary: fc.string({ unit: 'grapheme', maxLength: 20 }) },
  // Lone surrogates: JSON.stringify escapes them, the daemon must echo them back escaped.
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 20 }) },
  { weight: 2, arbitrary: fc.constantFrom(...PROTO_NAMES, 'null', 'undefined', '0', '-1', 'NaN', 'ø', '\u0000', ' ', '\t', '../..', '%s%n') },
);

const someJson = fc.jsonValue({ maxDepth: 2 });
/**
 * Deep nesting is written as a marker that `serialize` expands into text: JSON.stringify
 * itself recurses and would overflow the stack first.
 */
const deep = fc.record({ n: fc.integer({ min: 100, max: 20_000 }), open: fc.constantFrom('[', '{') }).map(({ n, open }) => `\u0000DEEP:${n}:${open}\u0000`);
const DEEP_MARKER = /"\\u0000DEEP:(\d+):([[{])\\u0000"/g;

/** JSON text of a generated value, with deep-nesting markers expanded. */
export function serialize(v: unknown): string {
  return JSON.stringify(v).replace(DEEP_MARKER, (_m, n: string, open: string) => {
    const depth = Number(n);
    return open === '[' ? `${'['.repeat(depth)}1${']'.repeat(depth)}` : `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
  });
}

const anyValue = fc.oneof({ weight: 4, arbitrary: someJson }, { weight: 1, arbitrary: weirdString });

/** Rare in the traffic: huge strings and deep nesting make most of its bytes. */
const bigValue = fc.oneof(hugeString, deep);

export const idValue = fc.oneof(
  { weight: 6, arbitrary: fc.integer() },
  { weight: 4, arbitrary: weirdString },
  { weight: 2, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
  { weight: 1, arbitrary: fc.maxSafeNat() },
  { weight: 1, arbitrary: fc.constant(null) },
  // Not valid ids: answered with id null.
  { weight: 1, arbitrary: fc.boolean() },
  { weight: 1, arbitrary: fc.array(fc.integer(), { maxLength: 3 }) },
  { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 5 }), fc.integer(), { maxKeys: 2 }) },
);

/** Every key history and audit.verify take (a fuzzed key is never one of them). */
const TRAIL_KEYS = new Set(Object.keys(HistoryParamsSchema.shape));

const unknownKey = fc.oneof(fc.string({ minLength: 1, maxLength: 12 }), fc.constantFrom('__proto__', 'constructor', 'toString', 'Action', 'sessionid', '')).filter((k) => !RESERVED.has(k));

/** Scopes that hold no session (never the probe's), or invalid ones. */
const scopeValue = fc.oneof(
  { weight: 6, arbitrary: fc.constantFrom('fz-1', 'fz-2', 'fz.3', 'fz:4', 'fz@5', 'fz_6', 'FZ-7', ...PROTO_NAMES.filter((n) => /^[A-Za-z0-9_]+$/.test(n))) },
  { weight: 2, arbitrary: fc.stringMatching(/^fz-[A-Za-z0-9_.:@-]{0,120}$/) },
  { weight: 2, arbitrary: fc.constantFrom('', ' ', 'a b', 'fz/1', 'x'.repeat(129), 'ø', 'fz\n', '*') },
  { weight: 1, arbitrary: fc.oneof(fc.integer(), fc.constant(null), fc.boolean(), fc.array(fc.string(), { maxLength: 2 })) },
);

const sessionIdValue = fc.oneof({ weight: 4, arbitrary: fc.stringMatching(/^[a-z2-9]{8}$/) }, { weight: 4, arbitrary: weirdString.filter((s) => s.length > 0) });
const natural = fc.integer({ min: 0, max: 1000 });
const notNatural = fc.constantFrom(-1, 1.5, -0.5, '3', null, true, [], {}, 1e21);

type Params = Record<string, unknown>;

const listParams = fc.record({ action: fc.constant('list'), limit: natural, offset: natural }, { requiredKeys: ['action'] });
const pollParams = fc.record({ action: fc.constant('poll'), sessionId: sessionIdValue, timeout: fc.oneof(fc.integer({ min: 0, max: 60_000 }), fc.double({ min: 0, max: 1e9, noNaN: true })) }, { requiredKeys: ['action'] });
const logParams = fc.record({ action: fc.constant('log'), sessionId: sessionIdValue, offset: natural, limit: natural }, { requiredKeys: ['action'] });

/** One way to break process params, or none. */
const processBreaker = fc.oneof(
  { weight: 10, arbitrary: fc.constant((p: Params) => p) },
  { weight: 2, arbitrary: fc.tuple(unknownKey, anyValue).map(([k, v]) => (p: Params) => ({ ...p, [k]: v })) },
  { weight: 2, arbitrary: fc.oneof(weirdString, someJson).filter((a) => typeof a !== 'string' || !(PROCESS_ACTIONS as readonly string[]).includes(a)).map((a) => (p: Params) => ({ ...p, action: a })) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('offset', 'limit'), notNatural).map(([k, v]) => (p: Params) => ({ ...p, [k]: v })) },
  { weight: 1, arbitrary: fc.constantFrom(-1, '10', null, [], false).map((v) => (p: Params) => ({ ...p, timeout: v })) },
  { weight: 1, arbitrary: fc.constantFrom(5, '', null, true, [], {}).map((v) => (p: Params) => ({ ...p, sessionId: v })) },
);

export const processParams = fc
  .tuple(fc.oneof(listParams, pollParams, logParams), processBreaker, fc.option(scopeValue, { freq: 4, nil: undefined }))
  .map(([p, breakIt, scope]) => ({ ...breakIt(p as Params), ...(scope === undefined ? {} : { scope }) }));

/** Exec params that always fail the schema: the command is never a runnable string, and an unknown key is always there. */
export const execParams = fc
  .record({
    command: fc.option(fc.oneof(fc.constant(''), fc.integer(), fc.constant(null), fc.boolean(), fc.array(fc.string(), { maxLength: 3 }), fc.dictionary(fc.string(), fc.string(), { maxKeys: 2 })), { nil: undefined }),
    junkKey: unknownKey.filter((k) => !PROTO_NAMES.includes(k)),
    junk: anyValue,
    extra: fc.dictionary(fc.constantFrom('workdir', 'yieldMs', 'background', 'timeout', 'pty', 'stdin', 'env', 'name', 'key'), someJson, { maxKeys: 3 }),
    scope: fc.option(scopeValue, { freq: 3, nil: undefined }),
  })
  .map(({ command, junkKey, junk, extra, scope }) => ({
    ...extra,
    ...(command === undefined ? {} : { command }),
    [junkKey]: junk,
    ...(scope === undefined ? {} : { scope }),
  }));

interface Call {
  method: unknown;
  params?: unknown;
}

const call: fc.Arbitrary<Call> = fc.oneof(
  { weight: 12, arbitrary: processParams.map((params) => ({ method: 'process', params })) },
  { weight: 6, arbitrary: fc.option(fc.oneof(fc.constant({}), fc.dictionary(fc.string({ maxLength: 8 }), anyValue, { maxKeys: 3 })), { nil: undefined }).map((params) => ({ method: 'daemon.status', params })) },
  { weight: 1, arbitrary: fc.option(fc.constant({}), { nil: undefined }).map((params) => ({ method: 'tools.list', params })) },
  { weight: 5, arbitrary: execParams.map((params) => ({ method: 'exec', params })) },
  {
    weight: 4,
    arbitrary: fc.oneof(
      execParams.map((p) => ({ ...p, tool: 'exec' })),
      processParams.map((p) => ({ ...p, tool: 'process' })),
      fc.tuple(fc.oneof(weirdString, someJson), processParams).map(([tool, p]) => ({ ...p, tool })),
    ).map((params) => ({ method: 'tool', params })),
  },
  { weight: 6, arbitrary: fc.tuple(weirdString.filter((m) => !KNOWN_METHODS.has(m)), fc.option(anyValue, { nil: undefined })).map(([method, params]) => ({ method, params })) },
  { weight: 1, arbitrary: fc.option(fc.record({ id: idValue }), { nil: undefined }).map((params) => ({ method: '$/cancelRequest', params })) },
  // The trail's methods with a key their schemas do not have: refused by name, whoever asks.
  {
    weight: 2,
    arbitrary: fc
      .record({ method: fc.constantFrom('history', 'audit.verify'), junkKey: unknownKey.filter((k) => !PROTO_NAMES.includes(k) && !TRAIL_KEYS.has(k)), junk: anyValue, scope: fc.option(scopeValue, { freq: 3, nil: undefined }) })
      .map(({ method, junkKey, junk, scope }) => ({ method, params: { [junkKey]: junk, ...(scope === undefined ? {} : { scope }) } })),
  },
  { weight: 1, arbitrary: fc.option(fc.record({ subscription: anyValue }), { nil: undefined }).map((params) => ({ method: 'unsubscribe', params })) },
);

const ABSENT = Symbol('absent');

/** A request object: mostly well-formed, sometimes broken in its envelope. */
export const request = fc
  .record({
    call,
    id: fc.oneof({ weight: 5, arbitrary: idValue }, { weight: 1, arbitrary: fc.constant(ABSENT) }),
    jsonrpc: fc.oneof({ weight: 30, arbitrary: fc.constant<unknown>('2.0') }, fc.constantFrom<unknown>(ABSENT, '1.0', '2', 2, null, '2.0 ', '', ['2.0'])),
    method: fc.oneof({ weight: 30, arbitrary: fc.constant<unknown>(ABSENT) }, fc.constantFrom<unknown>(5, null, true, [], {}, ['process'])),
    params: fc.oneof({ weight: 30, arbitrary: fc.constant<unknown>(ABSENT) }, fc.constantFrom<unknown>('list', 3, true, null, [], ['echo hi'], [{ action: 'list' }])),
    extra: fc.option(fc.dictionary(fc.string({ maxLength: 6 }).filter((k) => !['jsonrpc', 'id', 'method', 'params'].includes(k)), someJson, { maxKeys: 2 }), { freq: 8, nil: undefined }),
  })
  .map(({ call: c, id, jsonrpc, method, params, extra }) => {
    const req: Record<string, unknown> = { ...extra };
    if (jsonrpc !== ABSENT) req.jsonrpc = jsonrpc;
    if (id !== ABSENT) req.id = id;
    req.method = method === ABSENT ? c.method : method;
    const p = params === ABSENT ? c.params : params;
    if (p !== undefined) req.params = p;
    return req;
  });

const batch = fc.array(
  fc.oneof({ weight: 12, arbitrary: request }, { weight: 1, arbitrary: someJson }, { weight: 1, arbitrary: fc.array(request, { maxLength: 2 }) }),
  { minLength: 0, maxLength: 12 },
);

const line = (text: string, ending = '\n') => Buffer.from(text + ending, 'utf8');

/** Where to put something into a frame: a fraction of its length. */
const at = fc.double({ min: 0, max: 1, noNaN: true });

/** A request carrying a huge string or deep nesting somewhere (it may pass the frame limit). */
const bigRequest = fc.tuple(fc.constantFrom('id', 'method', 'sessionId', 'status', 'unknown', 'junk'), hugeString, bigValue, idValue).map(([where, huge, big, id]) => {
  switch (where) {
    case 'id':
      return { jsonrpc: '2.0', id: huge, method: 'daemon.status' };
    case 'method':
      return { jsonrpc: '2.0', id, method: huge };
    case 'sessionId':
      return { jsonrpc: '2.0', id, method: 'process', params: { action: 'poll', sessionId: huge, scope: 'fz-1' } };
    case 'status':
      return { jsonrpc: '2.0', id, method: 'daemon.status', params: { x: big } };
    case 'unknown':
      return { jsonrpc: '2.0', id, method: 'fz.unknown', params: big };
    default:
      return { jsonrpc: '2.0', id, method: 'process', params: { action: 'list', scope: 'fz-1', big } };
  }
});

/** One frame: the bytes of one or more lines, always ending with a newline. */
export const frame: fc.Arbitrary<Buffer> = fc.oneof(
  { weight: 1, arbitrary: bigRequest.map((r) => line(serialize(r))) },
  { weight: 80, arbitrary: fc.tuple(request, fc.constantFrom('\n', '\n', '\n', '\r\n', ' \n')).map(([r, end]) => line(serialize(r), end)) },
  { weight: 16, arbitrary: batch.map((b) => line(serialize(b))) },
  // Raw bytes, a line of them or several.
  { weight: 8, arbitrary: fc.uint8Array({ minLength: 1, maxLength: 300 }).map((b) => Buffer.concat([Buffer.from(b), Buffer.from('\n')])) },
  // Broken UTF-8 somewhere in a request (inside a string it stays a request; elsewhere it is a parse error).
  {
    weight: 8,
    arbitrary: fc.tuple(request, fc.constantFrom(...BROKEN_UTF8), at).map(([r, bad, where]) => {
      const b = Buffer.from(serialize(r));
      const i = Math.floor(where * b.length);
      return Buffer.concat([b.subarray(0, i), Buffer.from(bad), b.subarray(i), Buffer.from('\n')]);
    }),
  },
  // Newlines in odd places: inside strings, between tokens, doubled, alone, CR without LF.
  {
    weight: 8,
    arbitrary: fc.tuple(request, fc.constantFrom('\n', '\r\n', '\n\n', '\r', ' \n ', '\n\r\n'), at).map(([r, nl, where]) => {
      const t = serialize(r);
      const i = Math.floor(where * t.length);
      return line(t.slice(0, i) + nl + t.slice(i));
    }),
  },
  { weight: 4, arbitrary: fc.constantFrom('', ' ', '\t', '\r', '   \t ').map((blank) => line(blank)) },
  // Almost JSON: truncated, an extra bracket, a trailing comma, two objects on one line.
  {
    weight: 6,
    arbitrary: fc.tuple(request, fc.constantFrom('cut', 'close', 'comma', 'two')).map(([r, how]) => {
      const t = serialize(r);
      if (how === 'cut') return line(t.slice(0, Math.max(1, t.length - 1)));
      if (how === 'close') return line(`${t}}`);
      if (how === 'comma') return line(`[${t},]`);
      return line(`${t}${t}`);
    }),
  },
);

/**
 * Generated frames left out because the exec guard could not rule out that they run a command
 * (broken UTF-8 landing inside an empty command makes it a string; the unknown key still makes
 * it invalid, but the guard does not count on that).
 */
export const refused = { runnable: 0 };

export interface Traffic {
  frames: Buffer[];
  /** The answers the frames must get, as the oracle says. */
  singles: Tally;
  batches: Tally;
}

/**
 * `n` frames whose lines all fit in `maxFrame` bytes, with the answers they must get. Frames the
 * oracle cannot judge exactly, or that could run a command, are dropped and drawn again;
 * generated frames that are too large go to `oversize`, for the over-size connections.
 */
export function sampleTraffic(n: number, seed: number, maxFrame: number, oversize: Buffer[] = []): Traffic {
  const traffic: Traffic = { frames: [], singles: new Tally(), batches: new Tally() };
  for (let round = 0; traffic.frames.length < n; round++) {
    for (const bytes of fc.sample(frame, { ...(fc.readConfigureGlobal() as fc.Parameters<Buffer>), seed: seed + round * 7919, numRuns: n - traffic.frames.length })) {
      if (traffic.frames.length >= n) break;
      const answers = judge(bytes, maxFrame);
      if (answers === 'oversize') oversize.push(bytes);
      if (typeof answers === 'string') continue;
      traffic.frames.push(bytes);
      for (const a of answers) {
        const sample = a.line.toString('utf8');
        if (a.single) traffic.singles.add(a.single, sample);
        if (a.batch) traffic.batches.add(a.batch, sample);
      }
    }
  }
  return traffic;
}

/** The answers to each line of a frame, or why the frame is not used. */
function judge(bytes: Buffer, maxFrame: number): (LineAnswer & { line: Buffer })[] | 'oversize' | 'unjudgeable' {
  const out: (LineAnswer & { line: Buffer })[] = [];
  let start = 0;
  try {
    for (let nl = bytes.indexOf(10); nl !== -1; nl = bytes.indexOf(10, start)) {
      if (nl - start > maxFrame) return 'oversize';
      const line = bytes.subarray(start, nl);
      const a = expectLine(line);
      if (a) out.push({ ...a, line });
      start = nl + 1;
    }
  } catch (err) {
    if (err instanceof WouldRun) refused.runnable++;
    if (err instanceof Unpredictable || err instanceof WouldRun) return 'unjudgeable';
    throw err;
  }
  return out;
}
