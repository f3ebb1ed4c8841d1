import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { JsonText } from '../json-text.js';
import { sessionRecord } from '../render.js';
import { holdResources, sessionResources, usageMark } from '../../runner/cgroup.js';
import { askPorts, askPortsOf, portsMark } from '../../runner/ports.js';
import { sessionEdits } from '../../session/edits.js';
import { ALL_SCOPES } from '../../session/registry.js';
import type { Resources, Session } from '../../session/session.js';

/**
 * Sessions of the scope, newest first: all of them, or the page `[offset, offset + limit)`. The
 * answer is JSON bytes put together from each session's kept entry (listEntry), so a list of a
 * thousand sessions neither builds a thousand records nor serializes and encodes them on every
 * call, and leaves no large string behind for the collector.
 */
export function listAction(d: Daemon, ctx: CallContext, p: ProcessParams): JsonText | Promise<JsonText> {
  const offset = p.offset ?? 0;
  const key = `${ctx.scope}\0${offset}\0${p.limit ?? ''}`;
  // The page answered last, while nothing it was made from has moved (stampOf): its bytes with the
  // running times now, and no session looked at. Touching fifty sessions' objects a page (and their
  // samples and entries) was what set this daemon's p99 apart from a bare server's on a VM that
  // holds a thread up when it comes back to memory (docs/benchmarks.md).
  const last = keptPages(d).get(key);
  if (last !== undefined && last.stamp === stampOf(d)) {
    const bytes = withRuntimes(last);
    if (bytes) return new JsonText(bytes, () => giveBack(last, bytes));
  }
  const page = d.registry.page(ctx.scope, offset, p.limit);
  // Keeps each running session's ports and usage looked at while lists ask (runner/ports.ts,
  // runner/usage.ts). Sessions not looked at yet (the first list after a quiet spell) are read a
  // few per turn, and this answer waits for them, not every other client's request behind it.
  const looks = askPortsOf(page.sessions);
  const samples = holdResources(page.sessions);
  if (looks || samples) return Promise.all([looks, samples]).then(() => answer(d, ctx, p, key, offset, d.registry.page(ctx.scope, offset, p.limit), true));
  return answer(d, ctx, p, key, offset, page, false);
}

/**
 * What a kept page was made from, as one number: the registry's sessions (which there are, which
 * run), every session's revision and output count (session/edits.ts), and the usage samples and
 * ports looks (held, made anew, asked for in this refresh). Each count only grows, so the sum is
 * the same only when every one of them is.
 */
const stampOf = (d: Daemon): number => d.registry.version + sessionEdits() + usageMark() + portsMark();

/** `later`: the page was taken again once the first looks were in. */
function answer(d: Daemon, ctx: CallContext, p: ProcessParams, key: string, offset: number, page: Page, later: boolean): JsonText {
  // The page as it is once the looks are in: a session new to it since is looked at now.
  if (later) for (const s of page.sessions) askPorts(s);
  const pages = keptPages(d);
  const last = pages.get(key);
  // The kept page is checked session by session, with nothing allocated: a page of 50 asked over
  // and over leaves only its answer's copy behind for the collector.
  if (last && samePage(last, page)) {
    // Taken once the page is known to be what the kept one says: what moved since shows in it.
    last.stamp = stampOf(d);
    const bytes = withRuntimes(last);
    if (bytes) return new JsonText(bytes, () => giveBack(last, bytes));
  }
  const resources = page.sessions.map(sessionResources);
  const entries = page.sessions.map((s, i) => listEntry(s, resources[i] !== undefined));
  const made = makePage(ctx.scope === ALL_SCOPES, page, entries, resources, offset, p.limit);
  made.stamp = stampOf(d);
  pages.delete(key);
  pages.set(key, made);
  if (pages.size > MAX_KEPT_PAGES) pages.delete(pages.keys().next().value!);
  return new JsonText(made.bytes);
}

/**
 * A list answer as it was last made for one scope and page: its bytes, and where in them each
 * session's runtimeMs is written. While no session of the page changed and no usage sample was
 * read again (once a second while asked), the next answer is a copy of these bytes with the
 * running times written again in place: one copy instead of putting a thousand entries together.
 */
interface KeptPage {
  /** Each session's kept entry: made for one session, so the same entries mean the same sessions (none held here). */
  entries: Entry[];
  resources: (Resources | undefined)[];
  total: number;
  running: number;
  bytes: Buffer;
  /** Byte offset and width of each session's runtimeMs in `bytes`. */
  at: Uint32Array;
  width: Uint8Array;
  /**
   * Copies of `bytes` the socket has finished writing, to be written over for the next answer.
   * A fresh buffer per answer is memory outside the JS heap, and V8 answers its growth with full
   * collections of the whole heap (external memory pressure): with a thousand sessions a list
   * of all of them every few ms made one every second or two, each holding the thread 40-100 ms
   * on a loaded machine (docs/benchmarks.md, tails at 1,000 sessions).
   */
  spare: Buffer[];
  /** Each session's start, and its end (NaN while it runs): the running times written without a look at the sessions. */
  starts: Float64Array;
  ends: Float64Array;
  /** A session of the page, whose clock is the daemon's (every session of a daemon shares it); none for an empty page. */
  first: Session | undefined;
  /** What it was made from, when it was last known to be true (stampOf); NaN until then. */
  stamp: number;
}

/** Copies kept per page for the next answers; more answers in flight at once than this get new buffers. */
const MAX_SPARE = 2;

/** An answer's copy is out on the socket: keep it for the next answer of the same page. */
function giveBack(kept: KeptPage, bytes: Buffer): void {
  if (kept.spare.length < MAX_SPARE && bytes.length === kept.bytes.length) kept.spare.push(bytes);
}

/** Pages kept per daemon: a few scopes' or callers' pages (offset, limit) at once. */
const MAX_KEPT_PAGES = 8;
const keptByDaemon = new WeakMap<Daemon, Map<string, KeptPage>>();

function keptPages(d: Daemon): Map<string, KeptPage> {
  let pages = keptByDaemon.get(d);
  if (!pages) keptByDaemon.set(d, (pages = new Map()));
  return pages;
}

/** Whether the kept page is this one: the same sessions, each with the entry and the usage sample it was made from. */
function samePage(kept: KeptPage, page: Page): boolean {
  if (kept.total !== page.total || kept.running !== page.running || kept.entries.length !== page.sessions.length) return false;
  for (let i = 0; i < page.sessions.length; i++) {
    const s = page.sessions[i];
    const r = sessionResources(s);
    if (kept.resources[i] !== r || kept.entries[i] !== listEntry(s, r !== undefined)) return false;
  }
  return true;
}

type Page = { sessions: Session[]; total: number; running: number };

/**
 * A copy of the kept bytes with each session's running time now: a spare copy already written
 * out, or a new one (never the kept buffer itself, nor a copy still on its way out: an answer
 * handed to the socket may not be written yet). Undefined when a time needs more digits than
 * its place holds: then the page is made again.
 */
function withRuntimes(kept: KeptPage): Buffer | undefined {
  const spare = kept.spare.pop();
  const out = spare ? (kept.bytes.copy(spare), spare) : Buffer.from(kept.bytes);
  const now = kept.first?.clock() ?? 0;
  for (let i = 0; i < kept.at.length; i++) {
    const ended = kept.ends[i];
    if (!writeDigits(out, kept.at[i], kept.width[i], (Number.isNaN(ended) ? now : ended) - kept.starts[i])) return undefined;
  }
  return out;
}

/** Write the integer `n` (>= 0) as exactly `width` ASCII digits at `at`, with no string made; false when it has another number of digits. */
function writeDigits(out: Buffer, at: number, width: number, n: number): boolean {
  if (!Number.isSafeInteger(n) || n < 0) return false;
  for (let i = at + width - 1; i >= at; i--) {
    out[i] = 48 + (n % 10);
    n = Math.floor(n / 10);
    // A leading zero would be a number of fewer digits.
    if (n === 0 && i > at) return false;
  }
  return n === 0;
}

function makePage(all: boolean, page: Page, entries: Entry[], resources: (Resources | undefined)[], offset: number, limit?: number): KeptPage {
  const pieces: (Buffer | string)[] = [];
  let pos = 0;
  const put = (piece: Buffer | string) => {
    pieces.push(piece);
    pos += typeof piece === 'string' ? Buffer.byteLength(piece) : piece.length;
  };
  const at = new Uint32Array(entries.length);
  const width = new Uint8Array(entries.length);
  const lines: string[] = [];
  const first = page.sessions[0] as Session | undefined;
  const now = first?.clock() ?? 0;
  const starts = new Float64Array(entries.length);
  const ends = new Float64Array(entries.length);
  put('{"sessions":[');
  for (let i = 0; i < entries.length; i++) {
    const s = page.sessions[i];
    const e = entries[i];
    if (i > 0) put(',');
    // An operator's view (scope "*") spans scopes, so each session says whose it is.
    if (all) {
      put(`{"scope":${JSON.stringify(s.scope)},`);
      put(e.head.subarray(1));
    } else put(e.head);
    starts[i] = s.startedAt;
    ends[i] = s.endedAt ?? Number.NaN;
    const ms = String(s.runtimeMsAt(now));
    at[i] = pos;
    width[i] = ms.length;
    put(ms);
    const r = resources[i];
    if (r !== undefined) {
      put(RESOURCES_KEY);
      put(resourcesJson(r));
    }
    put(e.rest);
    lines.push(e.line);
  }
  const text = listText(lines, page.total, page.running, offset, limit);
  const limitField = limit === undefined ? '' : `,"limit":${limit}`;
  put(`],"total":${page.total},"offset":${offset}${limitField},"text":${JSON.stringify(text)}}`);
  return { entries, resources, total: page.total, running: page.running, bytes: concat(pieces, pos), at, width, spare: [], starts, ends, first, stamp: Number.NaN };
}

/** The pieces as one buffer of `size` bytes, strings written as UTF-8 into it (no buffer of their own). */
function concat(pieces: (Buffer | string)[], size: number): Buffer {
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const p of pieces) at += typeof p === 'string' ? out.write(p, at) : p.copy(out, at);
  return out;
}

/**
 * A session's list record as JSON bytes around its two moving figures, runtimeMs and resources
 * (`head` + runtimeMs + [`,"resources":` + the sample] + `rest`), and its line of the text.
 */
interface Entry {
  revision: number;
  outputChars: number;
  /** Whether the record has resources (a session with a cgroup): the sample itself is put in per page. */
  measured: boolean;
  changes: unknown;
  head: Buffer;
  rest: Buffer;
  line: string;
}

const kept = new WeakMap<Session, Entry>();

/**
 * The kept entry of a session, made again only when something it shows changed: the session's
 * revision (every change of its state), its output count (the tail), whether it has a usage
 * sample, or its review summary (an object replaced, never changed in place).
 */
function listEntry(s: Session, measured: boolean): Entry {
  const hit = kept.get(s);
  if (hit && hit.revision === s.revision && hit.outputChars === s.output.totalChars && hit.measured === measured && hit.changes === s.changes) return hit;
  const record = sessionRecord(s);
  // Written with marks in their places and cut around them: runtimeMs, and resources right after it (render.ts).
  const json = JSON.stringify({ ...record, runtimeMs: -1, resources: measured ? -1 : undefined });
  // The record's first "runtimeMs" key is its own: the fields before it are strings and scalars, whose quotes JSON escapes.
  const at = json.indexOf(RUNTIME_MARK);
  const mark = measured ? `${RUNTIME_MARK},"resources":-1` : RUNTIME_MARK;
  if (at < 0 || json.slice(at, at + mark.length) !== mark) throw new Error(`list: a session record does not have runtimeMs${measured ? ' and resources' : ''} where expected`);
  const e: Entry = {
    revision: s.revision,
    outputChars: s.output.totalChars,
    measured,
    changes: s.changes,
    head: Buffer.from(json.slice(0, at + RUNTIME_KEY.length)),
    rest: Buffer.from(json.slice(at + mark.length)),
    line: `${s.id}  ${(record.paused ? 'paused' : record.status).padEnd(9)}  ${s.name}`,
  };
  kept.set(s, e);
  return e;
}

const RUNTIME_KEY = '"runtimeMs":';
const RUNTIME_MARK = `${RUNTIME_KEY}-1`;
const RESOURCES_KEY = ',"resources":';

/** A usage sample as JSON, made once per sample (a sample is replaced when read again, never changed). */
const sampleJson = new WeakMap<Resources, string>();
function resourcesJson(r: Resources): string {
  let json = sampleJson.get(r);
  if (json === undefined) sampleJson.set(r, (json = JSON.stringify(r)));
  return json;
}

/** The page for a model or a person: a count, one line per session, and how to get the rest. */
function listText(lines: string[], total: number, running: number, offset: number, limit?: number): string {
  if (total === 0) return 'No sessions.';
  const head = `${total} session(s), ${running} running`;
  if (lines.length === 0) {
    if (offset < total) return `${head}.`;
    return `${head}; none at offset ${offset}: offsets run from 0 (the newest) to ${total - 1}.`;
  }
  const end = offset + lines.length;
  if (offset === 0 && end === total) return `${head}:\n${lines.join('\n')}`;
  // There is more after the page only when a limit cut it, so the hint repeats that limit.
  const more = end < total ? `; pass offset:${end}, limit:${limit} for more` : '';
  return `${head}, newest first:\n${lines.join('\n')}\nShowing ${offset + 1}–${end} of ${total}${more}.`;
}
