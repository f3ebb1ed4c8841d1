import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { target } from './target.js';

export const DEFAULT_LOG_LINES = 200;

export interface LogPage {
  lines: string[];
  /** Index of the first line returned. */
  from: number;
  totalLines: number;
  hint: string | undefined;
}

/** Split output into lines; a trailing newline does not start another line. */
export function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/**
 * The four paging cases (SPEC §6): neither → last 200 lines (with a hint when there are more);
 * limit only → last L; offset only → O to the end; both → [O, O+L).
 */
export function pageLines(all: string[], offset: number | undefined, limit: number | undefined): LogPage {
  const total = all.length;
  let from: number;
  let to: number;
  let hint: string | undefined;
  if (offset === undefined && limit === undefined) {
    from = Math.max(0, total - DEFAULT_LOG_LINES);
    to = total;
    if (from > 0) hint = `[showing last ${DEFAULT_LOG_LINES} of ${total} lines; pass offset/limit to page]`;
  } else if (offset === undefined) {
    from = Math.max(0, total - limit!);
    to = total;
  } else {
    from = Math.min(offset, total);
    to = limit === undefined ? total : Math.min(total, offset + limit);
    if (offset > total) hint = `[offset ${offset} is past the end: there are ${total} lines]`;
  }
  return { lines: all.slice(from, to), from, totalLines: total, hint };
}

export async function logAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  // Past the in-memory cap, page over the spool on disk, which holds much more.
  // A session lost in a crash has its output only there.
  const fromSpool = (s.output.droppedChars > 0 || s.reason === 'lost') && s.spool !== undefined && !s.spool.failed;
  if (fromSpool) await s.spool!.drained();
  const text = fromSpool ? s.spool!.read() : s.output.text();
  const page = pageLines(splitLines(text), p.offset, p.limit);
  const output = page.lines.join('\n');
  const parts: string[] = [];
  if (fromSpool && s.spool!.droppedBytes > 0) {
    parts.push(`[the spool keeps the newest output: the first ${s.spool!.droppedBytes} bytes rotated away (maxLogBytes); lines count from the oldest kept, and the first may be partial]`);
  } else if (!fromSpool && s.output.droppedChars > 0) {
    parts.push(`[the first ${s.output.droppedChars} characters were dropped by the ${s.output.capChars}-character cap; lines count from the oldest retained, and the first may be partial]`);
  }
  if (output) parts.push(output);
  if (page.hint) parts.push(page.hint);
  if (parts.length === 0) parts.push(page.totalLines === 0 ? '(no output yet)' : '(no lines in that range)');
  return {
    status: s.status,
    sessionId: s.id,
    output,
    offset: page.from,
    lines: page.lines.length,
    totalLines: page.totalLines,
    totalChars: text.length,
    truncated: fromSpool ? s.spool!.droppedBytes > 0 : s.output.droppedChars > 0,
    // What this text does not hold of the whole output, so droppedChars + totalChars = all output so far.
    droppedChars: fromSpool ? Math.max(0, s.output.totalChars - text.length) : s.output.droppedChars,
    ...(fromSpool ? { source: 'spool', droppedBytes: s.spool!.droppedBytes } : {}),
    text: parts.join('\n'),
  };
}
