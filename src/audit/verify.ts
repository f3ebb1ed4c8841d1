import { readFileSync } from 'node:fs';
import { trailFiles } from './files.js';
import { GENESIS, hashOf, headOf, parseRecord, type TrailRecord } from './line.js';

export type BadWhy = 'changed' | 'missing' | 'reordered' | 'torn';

/** `audit.verify` (SPEC §18): whether the trail is whole and, if not, the first line that is not. */
export interface VerifyResult {
  ok: boolean;
  records: number;
  files: number;
  firstBad?: { file: string; line: number; why: BadWhy };
  /** Records torn by a crash that the daemon found at its next start and went on after (named, not a fault). */
  torn?: { file: string; line: number }[];
  /** Records the daemon gave up writing (a 'lost' record says so in the trail). */
  lost?: number;
  /** Files removed by the bounds (each removal is a record). */
  removed?: number;
}

/** How far to look ahead for the record a gap skipped: a swap is near, a deletion is nowhere. */
const LOOKAHEAD = 1000;

interface Line {
  file: string;
  line: number;
  text: string;
  /** The file's last piece had no newline: a record the writer did not finish. */
  unterminated: boolean;
}

/**
 * Read the whole trail once, in order, and follow its chain: each record's `seq` one past the
 * one before and its `prev` the hash of the line before. What breaks it is named by the kind of
 * break: a line whose hash its successor does not hold was `changed`; a seq that skips ahead to
 * a record found nowhere later is `missing`; one whose record comes later, or that goes back,
 * is `reordered`; an unfinished last line is `torn`. The oldest file's first record names the
 * last record of a removed file (a `removed` record says which) or the genesis.
 * `head`: the last record the running daemon wrote, so an edit of the newest line is seen too.
 */
export function verifyTrail(dir: string, head?: { seq: number; hash: string }): VerifyResult {
  const files = trailFiles(dir);
  const lines: Line[] = [];
  for (const f of files) {
    const text = readFileSync(f.path, 'utf8');
    const parts = text.split('\n');
    const tail = parts.pop()!;
    parts.forEach((t, i) => lines.push({ file: f.name, line: i + 1, text: t, unterminated: false }));
    if (tail !== '') lines.push({ file: f.name, line: parts.length + 1, text: tail, unterminated: true });
  }
  const result: VerifyResult = { ok: true, records: 0, files: files.length };
  const bad = (l: Pick<Line, 'file' | 'line'>, why: BadWhy): VerifyResult => ({ ...result, ok: false, firstBad: { file: l.file, line: l.line, why } });
  // Only the trail's own records are parsed whole (for their fields); the rest by their head.
  const parsed = lines.map((l) => {
    const h = headOf(l.text);
    if (!h) return undefined;
    return h.type === 'audit' ? parseRecord(l.text) : (h as TrailRecord);
  });
  const removed = new Map<string, number>();
  let prevHash: string | undefined;
  let expect: number | undefined;
  let first: { at: Line; rec: TrailRecord } | undefined;
  let last: Line | undefined;
  // Torn lines a later start found and said (an `audit` record naming them): passed over, listed.
  const said = new Set<string>();
  for (const r of parsed) if (r?.type === 'audit' && r.event === 'torn') said.add(`${String(r.file)}:${String(r.line)}`);
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i];
    const rec = parsed[i];
    if (l.unterminated) return bad(l, i === lines.length - 1 ? 'torn' : 'changed');
    if (said.has(`${l.file}:${l.line}`)) {
      (result.torn ??= []).push({ file: l.file, line: l.line });
      continue;
    }
    if (!rec) return bad(l, 'changed');
    if (expect === undefined) first = { at: l, rec };
    else if (rec.seq > expect) {
      const later = seekSeq(parsed, i + 1, expect);
      return bad(l, later ? 'reordered' : 'missing');
    } else if (rec.seq < expect) return bad(l, 'reordered');
    else if (rec.prev !== prevHash) {
      // This line's link back is broken: the line before it changed, unless this line's own link forward is broken too.
      const next = nextRecord(parsed, i + 1);
      const ownBroken = next !== undefined && next.prev !== hashOf(l.text);
      return bad(ownBroken ? l : last!, 'changed');
    }
    if (rec.type === 'audit' && rec.event === 'removed' && typeof rec.lastHash === 'string' && typeof rec.lastSeq === 'number') {
      removed.set(rec.lastHash, rec.lastSeq);
      result.removed = (result.removed ?? 0) + 1;
    }
    if (rec.type === 'audit' && rec.event === 'lost' && typeof rec.records === 'number') result.lost = (result.lost ?? 0) + rec.records;
    prevHash = hashOf(l.text);
    expect = rec.seq + 1;
    last = l;
    result.records++;
  }
  if (first) {
    const { rec } = first;
    const genesis = rec.seq === 1 && rec.prev === GENESIS;
    if (!genesis && removed.get(rec.prev) !== rec.seq - 1) return bad(first.at, 'missing');
  }
  if (head && head.seq > 0) {
    const lastSeq = expect === undefined ? 0 : expect - 1;
    if (lastSeq < head.seq) return bad(last ? { file: last.file, line: last.line + 1 } : { file: files.at(-1)?.name ?? '', line: 1 }, 'missing');
    if (lastSeq === head.seq && prevHash !== head.hash) return bad(last!, 'changed');
  }
  return result;
}

function seekSeq(parsed: (TrailRecord | undefined)[], from: number, seq: number): boolean {
  for (let j = from; j < parsed.length && j < from + LOOKAHEAD; j++) if (parsed[j]?.seq === seq) return true;
  return false;
}

function nextRecord(parsed: (TrailRecord | undefined)[], from: number): TrailRecord | undefined {
  for (let j = from; j < parsed.length; j++) if (parsed[j]) return parsed[j];
  return undefined;
}
