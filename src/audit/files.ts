import { closeSync, fstatSync, openSync, readdirSync, readSync } from 'node:fs';
import { join } from 'node:path';

/** The trail's directory under the state directory (SPEC §18). */
export const auditDir = (stateDir: string) => join(stateDir, 'audit');

const NAME = /^audit-(\d{1,15})\.jsonl$/;

export interface TrailFile {
  n: number;
  name: string;
  path: string;
}

/** The trail's files, oldest first (by their number, never by their times). */
export function trailFiles(dir: string): TrailFile[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const out: TrailFile[] = [];
  for (const name of names) {
    const m = NAME.exec(name);
    if (m) out.push({ n: Number(m[1]), name, path: join(dir, name) });
  }
  return out.sort((a, b) => a.n - b.n);
}

export const fileName = (n: number) => `audit-${n}.jsonl`;

/** Up to `bytes` from the end of a file, and its size. */
export function readTail(path: string, bytes: number): { text: string; size: number } {
  const fd = openSync(path, 'r');
  try {
    const size = fstatSync(fd).size;
    const len = Math.min(size, bytes);
    const buf = Buffer.alloc(len);
    let got = 0;
    while (got < len) {
      const n = readSync(fd, buf, got, len - got, size - len + got);
      if (n === 0) break;
      got += n;
    }
    return { text: buf.toString('utf8', 0, got), size };
  } finally {
    closeSync(fd);
  }
}

/** The first line of a file (up to `bytes`), without reading the rest. */
export function readHead(path: string, bytes = 64 * 1024): string {
  const fd = openSync(path, 'r');
  try {
    const buf = Buffer.alloc(bytes);
    const n = readSync(fd, buf, 0, bytes, 0);
    const text = buf.toString('utf8', 0, n);
    const nl = text.indexOf('\n');
    return nl < 0 ? text : text.slice(0, nl);
  } finally {
    closeSync(fd);
  }
}
