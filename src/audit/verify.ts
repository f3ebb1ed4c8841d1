import { readFileSync } from 'node:fs';
import { trailFiles, type TrailFile } from './files.js';
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
  /** Only the trail's own records are parsed whole (for their fields); the rest by their head. */
  rec: TrailRecord | undefined;
}

const recordOf = (text: string): TrailRecord | undefined => {
  const h = headOf(text);
  if (!h) return undefined;
  return h.type === 'audit' ? parseRecord(text) : (h as TrailRecord);
};

/**
 * The trail's lines in order, read a file at a time: the files a reader is at and looks ahead
 * into are held, those it has passed are let go, so memory is a file or two (a file is at most
 * 32 MiB), never the whole trail.
 */
class Lines {
  private held: Line[][] = [];
  /** The index of held[0][0] among all the trail's lines. */
  private base = 0;
  private next = 0;

  constructor(private readonly files: TrailFile[]) {}

  /** Line `i` of the whole trail, or undefined past its end. */
  at(i: number): Line | undefined {
    for (;;) {
      let start = this.base;
      for (const lines of this.held) {
        if (i < start + lines.length) return i >= start ? lines[i - start] : undefined;
        start += lines.length;
      }
      if (this.next >= this.files.length) return undefined;
      this.held.push(readLines(this.files[this.next++]));
    }
  }

  /** Nothing before line `i` is asked for again. */
  release(i: number): void {
    while (this.held.length > 1 && this.base + this.held[0].length <= i) this.base += this.held.shift()!.length;
  }
}

function readLines(f: TrailFile): Line[] {
  const parts = readFileSync(f.path, 'utf8').split('\n');
  const tail = parts.pop()!;
  const lines = parts.map((text, i) => ({ file: f.name, line: i + 1, text, unterminated: false, rec: recordOf(text) }));
  if (tail !== '') lines.push({ file: f.name, line: parts.length + 1, text: tail, unterminated: true, rec: recordOf(tail) });
  return lines;
}

/** The torn lines a later start found and said (an `audit` record naming each), found without parsing other lines. */
function saidTorn(files: TrailFile[]): Set<string> {
  const said = new Set<string>();
  for (const f of files) {
    const text = readFileSync(f.path, 'utf8');
    for (let at = text.indexOf('"event":"torn"'); at >= 0; at = text.indexOf('"event":"torn"', at + 1)) {
      const start = text.lastIndexOf('\n', at) + 1;
      const end = text.indexOf('\n', at);
      const r = parseRecord(text.slice(start, end < 0 ? text.length : end));
      if (r?.type === 'audit' && r.event === 'torn') said.add(`${String(r.file)}:${String(r.line)}`);
    }
  }
  return said;
}

/**
 * Read the whole trail once, in order, and follow its chain: each record's `seq` one past the
 * one before and its `prev` the hash of the line before. What breaks it is named by the kind of
 * break: a line whose hash its successor does not hold was `changed`; a seq that skips ahead to
 * a record found nowhere later is `missing`; one whose record comes later, or that goes back,
 * is `reordered`; an unfinished last line is `torn`. The oldest file's first record names the
 * last record of a removed file (a `removed` record says which) or the genesis.
 * `head`: the last record the running daemon wrote, so an edit of the newest line is seen too.
 * Synchronous and a whole trail's worth of hashing: the daemon runs it on a thread of its own
 * (thread.ts).
 */
export function verifyTrail(dir: string, head?: { seq: number; hash: string }): VerifyResult {
  const files = trailFiles(dir);
  const said = saidTorn(files);
  const lines = new Lines(files);
  const result: VerifyResult = { ok: true, records: 0, files: files.length };
  const bad = (l: Pick<Line, 'file' | 'line'>, why: BadWhy): VerifyResult => ({ ...result, ok: false, firstBad: { file: l.file, line: l.line, why } });
  const removed = new Map<string, number>();
  let prevHash: string | undefined;
  let expect: number | undefined;
  let first: { at: Line; rec: TrailRecord } | undefined;
  let last: Line | undefined;
  for (let i = 0; ; i++) {
    const l = lines.at(i);
    if (!l) break;
    lines.release(i);
    const rec = l.rec;
    if (l.unterminated) return bad(l, lines.at(i + 1) === undefined ? 'torn' : 'changed');
    if (said.has(`${l.file}:${l.line}`)) {
      (result.torn ??= []).push({ file: l.file, line: l.line });
      continue;
    }
    if (!rec) return bad(l, 'changed');
    if (expect === undefined) first = { at: l, rec };
    else if (rec.seq > expect) {
      return bad(l, seekSeq(lines, i + 1, expect) ? 'reordered' : 'missing');
    } else if (rec.seq < expect) return bad(l, 'reordered');
    else if (rec.prev !== prevHash) {
      // This line's link back is broken: the line before it changed, unless this line's own link forward is broken too.
      const next = nextRecord(lines, i + 1);
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

function seekSeq(lines: Lines, from: number, seq: number): boolean {
  for (let j = from; j < from + LOOKAHEAD; j++) {
    const l = lines.at(j);
    if (!l) return false;
    if (l.rec?.seq === seq) return true;
  }
  return false;
}

function nextRecord(lines: Lines, from: number): TrailRecord | undefined {
  for (let j = from; j < from + LOOKAHEAD; j++) {
    const l = lines.at(j);
    if (!l) return undefined;
    if (l.rec) return l.rec;
  }
  return undefined;
}
