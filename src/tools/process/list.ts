import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { JsonText } from '../json-text.js';
import { sessionRecord } from '../render.js';
import { sessionResources } from '../../runner/cgroup.js';
import { ALL_SCOPES } from '../../session/registry.js';
import type { Session } from '../../session/session.js';

/**
 * Sessions of the scope, newest first: all of them, or the page `[offset, offset + limit)`. The
 * answer is JSON bytes put together from each session's kept entry (listEntry), so a list of a
 * thousand sessions neither builds a thousand records nor serializes and encodes them on every
 * call, and leaves no large string behind for the collector.
 */
export function listAction(d: Daemon, ctx: CallContext, p: ProcessParams): JsonText {
  const offset = p.offset ?? 0;
  const page = d.registry.page(ctx.scope, offset, p.limit);
  // An operator's view (scope "*") spans scopes, so each session says whose it is.
  const all = ctx.scope === ALL_SCOPES;
  const pieces: (Buffer | string)[] = ['{"sessions":['];
  const lines: string[] = [];
  for (const s of page.sessions) {
    const e = listEntry(s);
    if (lines.length > 0) pieces.push(',');
    if (all) pieces.push(`{"scope":${JSON.stringify(s.scope)},`, e.head.subarray(1));
    else pieces.push(e.head);
    pieces.push(String(s.runtimeMs), e.rest);
    lines.push(e.line);
  }
  const text = listText(lines, page.total, page.running, offset, p.limit);
  const limit = p.limit === undefined ? '' : `,"limit":${p.limit}`;
  pieces.push(`],"total":${page.total},"offset":${offset}${limit},"text":${JSON.stringify(text)}}`);
  return new JsonText(concat(pieces));
}

/** The pieces as one buffer, strings written as UTF-8 into it (no buffer of their own). */
function concat(pieces: (Buffer | string)[]): Buffer {
  let size = 0;
  for (const p of pieces) size += typeof p === 'string' ? Buffer.byteLength(p) : p.length;
  const out = Buffer.allocUnsafe(size);
  let at = 0;
  for (const p of pieces) at += typeof p === 'string' ? out.write(p, at) : p.copy(out, at);
  return out;
}

/** A session's list record as JSON bytes around its running time (`head` + runtimeMs + `rest`), and its line of the text. */
interface Entry {
  revision: number;
  outputChars: number;
  resources: unknown;
  changes: unknown;
  head: Buffer;
  rest: Buffer;
  line: string;
}

const kept = new WeakMap<Session, Entry>();

/**
 * The kept entry of a session, made again only when something it shows changed: the session's
 * revision (every change of its state), its output count (the tail), or its held usage sample
 * or review summary (objects replaced, never changed in place).
 */
function listEntry(s: Session): Entry {
  const resources = sessionResources(s);
  const hit = kept.get(s);
  if (hit && hit.revision === s.revision && hit.outputChars === s.output.totalChars && hit.resources === resources && hit.changes === s.changes) return hit;
  const record = sessionRecord(s);
  // runtimeMs moves on every call: the record is written with a mark there and cut around it.
  const json = JSON.stringify({ ...record, runtimeMs: -1 });
  // The record's first "runtimeMs" key is its own: the fields before it are strings and scalars, whose quotes JSON escapes.
  const at = json.indexOf(RUNTIME_MARK);
  const e: Entry = {
    revision: s.revision,
    outputChars: s.output.totalChars,
    resources,
    changes: s.changes,
    head: Buffer.from(json.slice(0, at + RUNTIME_KEY.length)),
    rest: Buffer.from(json.slice(at + RUNTIME_MARK.length)),
    line: `${s.id}  ${(record.paused ? 'paused' : record.status).padEnd(9)}  ${s.name}`,
  };
  kept.set(s, e);
  return e;
}

const RUNTIME_KEY = '"runtimeMs":';
const RUNTIME_MARK = `${RUNTIME_KEY}-1`;

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
