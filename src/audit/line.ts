import * as crypto from 'node:crypto';

/** The `prev` of the very first record of a trail. */
export const GENESIS = '0'.repeat(64);

/** The hex sha256 of a record's line (without its newline): the next record's `prev`. */
export function hashOf(line: string): string {
  return oneShot ? oneShot('sha256', line, 'hex') : crypto.createHash('sha256').update(line).digest('hex');
}

/** `crypto.hash` (Node 20.12 on) hashes a short string about three times faster than a Hash object. */
const oneShot = (crypto as { hash?: (algorithm: string, data: string, encoding: 'hex') => string }).hash;

const HEAD = /^\{"seq":(\d{1,15}),"time":"([^"]{1,40})","prev":"([0-9a-f]{64})","type":"([a-z_]{1,32})"/;

/**
 * `seq`, `time`, `prev` and `type` of a line as lineOf writes them, read without parsing the
 * rest: verify follows the chain by these and the line's hash, so a changed field elsewhere in
 * the line is caught by the hash. Undefined for a line that does not start so.
 */
export function headOf(line: string): { seq: number; time: string; prev: string; type: string } | undefined {
  const m = HEAD.exec(line);
  return m ? { seq: Number(m[1]), time: m[2], prev: m[3], type: m[4] } : undefined;
}

/**
 * One record's line: `seq`, `time` and `prev` first, always in that order, so a reader can find
 * them without parsing (history.ts skips whole ranges by `time` that way), then the event.
 */
export function lineOf(seq: number, time: string, prev: string, body: Record<string, unknown>): string {
  const rest = JSON.stringify(body);
  return `{"seq":${seq},"time":"${time}","prev":"${prev}"${rest.length > 2 ? `,${rest.slice(1)}` : '}'}`;
}

/** `time` of a line written by lineOf, read without parsing it; undefined for anything else. */
export function timeOfLine(line: string): string | undefined {
  const at = line.indexOf('"time":"');
  if (at < 0 || at > 40) return undefined;
  const end = line.indexOf('"', at + 8);
  return end < 0 ? undefined : line.slice(at + 8, end);
}

/** The parts of a record verify and history look at; other fields are the event's. */
export interface TrailRecord {
  seq: number;
  time: string;
  prev: string;
  type: string;
  [field: string]: unknown;
}

/** A line that is a record (an object with seq, time, prev and type), or undefined. */
export function parseRecord(line: string): TrailRecord | undefined {
  let r: unknown;
  try {
    r = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof r !== 'object' || r === null) return undefined;
  const o = r as Record<string, unknown>;
  if (!Number.isSafeInteger(o.seq) || typeof o.time !== 'string' || typeof o.prev !== 'string' || typeof o.type !== 'string') return undefined;
  return o as TrailRecord;
}
