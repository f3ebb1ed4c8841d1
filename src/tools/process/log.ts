import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import type { SessionOutput } from '../../session/output.js';
import type { Spool } from '../../session/spool.js';
import { target } from './target.js';
import { capText } from '../../session/chunks.js';

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
export function pageLines(all: string[], offset: number | undefined, limit: number | undefined, paging = 'pass offset/limit to page'): LogPage {
  const { from, to, hint } = pageRange(all.length, offset, limit, paging);
  return { lines: all.slice(from, to), from, totalLines: all.length, hint };
}

/** Which lines [from, to) a page of `total` lines holds (the four cases of pageLines). */
function pageRange(total: number, offset: number | undefined, limit: number | undefined, paging: string): { from: number; to: number; hint: string | undefined } {
  let from: number;
  let to: number;
  let hint: string | undefined;
  if (offset === undefined && limit === undefined) {
    from = Math.max(0, total - DEFAULT_LOG_LINES);
    to = total;
    if (from > 0) hint = `[showing last ${DEFAULT_LOG_LINES} of ${total} lines; ${paging}]`;
  } else if (offset === undefined) {
    from = Math.max(0, total - limit!);
    to = total;
  } else {
    from = Math.min(offset, total);
    to = limit === undefined ? total : Math.min(total, offset + limit);
    if (offset > total) hint = `[offset ${offset} is past the end: there are ${total} lines]`;
  }
  return { from, to, hint };
}

/** A page of a text's lines, found in place: `pageLines(splitLines(text))` joined, with no array of every line. */
export interface TextPage {
  /** The page's lines, joined by newlines. */
  output: string;
  /** Index of the first line returned, and how many. */
  from: number;
  lines: number;
  totalLines: number;
  /** Where the page starts in the text (characters). */
  start: number;
  hint: string | undefined;
}

export function pageText(text: string, offset: number | undefined, limit: number | undefined, paging = 'pass offset/limit to page'): TextPage {
  let newlines = 0;
  for (let i = text.indexOf('\n'); i !== -1; i = text.indexOf('\n', i + 1)) newlines++;
  const total = text === '' ? 0 : text.charCodeAt(text.length - 1) === 10 ? newlines : newlines + 1;
  const { from, to, hint } = pageRange(total, offset, limit, paging);
  /** Index of the k-th newline (1-based), from whichever end is nearer; text.length past the last. */
  const newlineAt = (k: number): number => {
    if (k > newlines) return text.length;
    let at = -1;
    if (k <= newlines / 2) for (let n = 0; n < k; n++) at = text.indexOf('\n', at + 1);
    else {
      at = text.length;
      for (let n = newlines; n >= k; n--) at = text.lastIndexOf('\n', at - 1);
    }
    return at;
  };
  if (from >= to) return { output: '', from, lines: 0, totalLines: total, start: from === 0 ? 0 : Math.min(text.length, newlineAt(from) + 1), hint };
  const start = from === 0 ? 0 : newlineAt(from) + 1;
  const end = newlineAt(to);
  return { output: text.slice(start, end), from, lines: to - from, totalLines: total, start, hint };
}

/**
 * A page holds at most `cap` characters (maxOutputChars, the bound of an exec answer): one line
 * can be the whole output (a job that prints no newline). Past it, a tail page keeps its newest
 * characters and a page from an offset its first; `cut` says how many went.
 */
export function capPage(output: string, cap: number, fromEnd: boolean): { output: string; cut: number } {
  const kept = capText(output, cap, fromEnd);
  return { output: kept, cut: output.length - kept.length };
}

/** Why the spool lacks its first bytes, each cause named with its own count. */
export function spoolDropNote(spool: Spool, maxLogBytes: number): string {
  const { rotated, budget, fault } = spool.dropped;
  const causes: string[] = [];
  if (rotated > 0) causes.push(`${rotated} rotated away (maxLogBytes = ${maxLogBytes})`);
  if (budget > 0) causes.push(`${budget} came faster than the spool's disk budget of 16 MiB/s and were dropped before reaching the disk`);
  if (fault > 0) causes.push(`${fault} were not spooled because the state directory refused writes (${spool.fault})`);
  return `[the spool keeps the newest output: ${spool.droppedBytes} earlier bytes are missing: ${causes.join('; ')}. Lines count from the oldest kept, and the first may be partial]`;
}

/**
 * Which characters of a page's `output` came on stderr: [start, end) offsets into it. The text
 * paged ends where the whole output ends (memory keeps the newest, the spool drops its oldest), so
 * its first character is the whole output's `totalChars - text.length`. Nothing is said when the
 * spool lost output in the middle (its budget, a disk fault), where that would not hold.
 */
function stderrOf(o: SessionOutput, textChars: number, pageStart: number, length: number, spool: Spool | undefined): [number, number][] {
  if (length === 0 || (spool && (spool.dropped.budget > 0 || spool.dropped.fault > 0))) return [];
  const start = o.totalChars - textChars + pageStart;
  return o.stderrIn(start, start + length);
}

export async function logAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  const spool = s.spool;
  if (spool) await spool.drained();
  // Past the in-memory cap, page over the spool on disk when it holds more (a disk fault can
  // leave it holding less). A session lost in a crash has its output only there.
  const retained = s.output.totalChars - s.output.droppedChars;
  const fromSpool =
    spool !== undefined && (s.reason === 'lost' || (s.output.droppedChars > 0 && spool.totalBytes - spool.droppedBytes > retained));
  // The default page (neither offset nor limit) is bounded: one line can be the whole output. A page asked for by offset or limit is given whole.
  const cap = p.offset === undefined && p.limit === undefined ? s.output.capChars : Infinity;
  const tailPage = p.offset === undefined;
  const paging = ctx.voice.paging(s.id);
  let page: Omit<TextPage, 'output'>;
  let output: string;
  let cut: number;
  let totalChars: number;
  if (fromSpool) {
    // Read in blocks, never whole: the spool holds up to maxLogBytes.
    let hint: string | undefined;
    const sp = spool.page((total) => {
      const r = pageRange(total, p.offset, p.limit, paging);
      hint = r.hint;
      return r;
    }, cap, tailPage);
    page = { from: sp.from, lines: sp.to - sp.from, totalLines: sp.totalLines, start: sp.start, hint };
    ({ output, cut, totalChars } = sp);
  } else {
    const text = s.output.text();
    const whole = pageText(text, p.offset, p.limit, paging);
    page = whole;
    ({ output, cut } = capPage(whole.output, cap, tailPage));
    totalChars = text.length;
  }
  const stderr = stderrOf(s.output, totalChars, page.start + (tailPage ? cut : 0), output.length, fromSpool ? spool : undefined);
  const parts: string[] = [];
  if (fromSpool && spool.droppedBytes > 0) {
    parts.push(spoolDropNote(spool, d.config().tools.exec.maxLogBytes));
  } else if (!fromSpool && s.output.droppedChars > 0) {
    parts.push(`[the first ${s.output.droppedChars} characters were dropped by the ${s.output.capChars}-character cap; lines count from the oldest retained, and the first may be partial]`);
  }
  if (!fromSpool && spool && spool.dropped.fault > 0) {
    parts.push(`[${spool.dropped.fault} bytes of this output were not spooled to disk (${spool.fault}): a daemon restart will not have them]`);
  }
  if (cut > 0 && tailPage) parts.push(`[the first ${cut} characters of this page were cut: a page holds at most ${cap} characters (maxOutputChars); pass a smaller limit, or offset to page from a line]`);
  if (output) parts.push(output);
  if (cut > 0 && !tailPage) parts.push(`[the last ${cut} characters of this page were cut: a page holds at most ${cap} characters (maxOutputChars); pass a smaller limit]`);
  if (page.hint) parts.push(page.hint);
  if (parts.length === 0) parts.push(page.totalLines > 0 ? '(no lines in that range)' : s.endedAt !== undefined ? '(no output; the session has ended)' : '(no output yet)');
  return {
    status: s.status,
    sessionId: s.id,
    output,
    offset: page.from,
    lines: page.lines,
    totalLines: page.totalLines,
    totalChars,
    truncated: fromSpool ? spool.droppedBytes > 0 : s.output.droppedChars > 0,
    // What this text does not hold of the whole output, so droppedChars + totalChars = all output so far.
    droppedChars: fromSpool ? Math.max(0, s.output.totalChars - totalChars) : s.output.droppedChars,
    // Where `output` starts in the whole output (as an output event's offset): a client that lost
    // its connection (a restart) takes up from the last offset it had.
    startChar: s.output.totalChars - totalChars + page.start + (tailPage ? cut : 0),
    ...(cut > 0 ? { cutChars: cut } : {}),
    ...(stderr.length > 0 ? { stderr } : {}),
    ...(fromSpool ? { source: 'spool', droppedBytes: spool.droppedBytes } : {}),
    ...(spool && spool.dropped.fault > 0 ? { notSpooled: { bytes: spool.dropped.fault, error: spool.fault } } : {}),
    text: parts.join('\n'),
  };
}
