import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import { createTwoFilesPatch, FILE_HEADERS_ONLY } from 'diff';
import { WorkspaceDirs } from './dirs.js';
import { shown } from './paths.js';
import type { Change } from './types.js';

/** Over this a file is named with its sizes, not dumped (SPEC §16). */
export const MAX_DIFF_BYTES = 1 << 20;
/** How many changed lines, and how long, a file's diff may take before it is named instead. */
const MAX_EDIT_LENGTH = 5000;
const DIFF_TIMEOUT_MS = 200;
/** A NUL byte in this much of a file's start makes it binary, as git decides. */
const SNIFF_BYTES = 8192;
export const DEFAULT_DIFF_LINES = 200;

export interface DiffPage {
  /** The lines of this page, joined with '\n'. */
  text: string;
  /** Index of the first line returned, and how many the whole diff has. */
  from: number;
  totalLines: number;
  hint?: string;
}

/**
 * The unified diff of the changes, the workspace's side against the session's, paged by lines
 * like `log` (offset from the first line; limit default 200). Binary files, and files over
 * 1 MiB, are named with their sizes. The workspace's side is read through WorkspaceDirs, so a
 * symlinked directory there is never read through.
 */
export function diff(files: readonly Change[], upper: string, workspace: string, page: { offset?: number; limit?: number } = {}): DiffPage {
  const dirs = new WorkspaceDirs(workspace);
  // The upper directory is walked as the workspace is, never through a symlink in a parent.
  const uppers = new WorkspaceDirs(upper);
  const lines: string[] = [];
  try {
    for (const c of files) lines.push(...fileDiff(c, uppers, dirs));
  } finally {
    dirs.close();
    uppers.close();
  }
  const from = Math.min(page.offset ?? 0, lines.length);
  const limit = page.limit ?? DEFAULT_DIFF_LINES;
  const to = Math.min(lines.length, from + limit);
  const out: DiffPage = { text: lines.slice(from, to).join('\n'), from, totalLines: lines.length };
  if (to < lines.length) out.hint = `[lines ${from}..${to} of ${lines.length}; pass offset: ${to} for more]`;
  return out;
}

type Side = { text: string } | { binary: true; size: number } | { tooBig: true; size: number } | { absent: true };

function fileDiff(c: Change, uppers: WorkspaceDirs, dirs: WorkspaceDirs): string[] {
  const name = shown(c.path);
  const header = [`diff ${name}`];
  if (c.kind === 'mode') return [...header, `old mode ${octal(c.oldMode)}`, `new mode ${octal(c.mode)}`];
  if (c.type === 'symlink' || c.oldType === 'symlink') header.push(`symlink: ${c.oldType === 'symlink' ? 'was a symlink' : `was ${c.oldType ?? 'absent'}`}${c.target !== undefined ? `, now -> ${shown(c.target)}` : ''}`);
  const isFile = (t: string | undefined) => t === 'file';
  if (!isFile(c.type) && !isFile(c.oldType)) {
    if (c.type === 'symlink' || c.oldType === 'symlink') return header;
    return [...header, `${c.kind} ${c.type ?? c.oldType ?? ''}`.trimEnd()];
  }
  const before: Side = isFile(c.oldType) ? readSide(dirs.at(c.path)) : { absent: true };
  const after: Side = isFile(c.type) && c.kind !== 'deleted' ? readSide(uppers.at(c.path)) : { absent: true };
  if (c.kind === 'type') header.push(`type: ${c.oldType} -> ${c.type ?? 'absent'}`);
  if ('binary' in before || 'binary' in after || 'tooBig' in before || 'tooBig' in after) {
    const what = 'tooBig' in before || 'tooBig' in after ? `Files over ${MAX_DIFF_BYTES} bytes not shown` : 'Binary files differ';
    return [...header, `${what}: ${sizeOf(before)} -> ${sizeOf(after)} bytes`];
  }
  const a = 'text' in before ? before.text : '';
  const b = 'text' in after ? after.text : '';
  // Bounded: a file rewritten line by line would take the diff minutes on the daemon's thread.
  const patch = createTwoFilesPatch('absent' in before ? '/dev/null' : `a/${name}`, 'absent' in after ? '/dev/null' : `b/${name}`, a, b, undefined, undefined, {
    headerOptions: FILE_HEADERS_ONLY,
    maxEditLength: MAX_EDIT_LENGTH,
    timeout: DIFF_TIMEOUT_MS,
  });
  if (patch === undefined) return [...header, `Files differ too much to show a diff here (${sizeOf(before)} -> ${sizeOf(after)} bytes)`];
  const body = patch.split('\n');
  if (body[body.length - 1] === '') body.pop();
  return [...header, ...body];
}

/** A file's text, or why it is not shown; never following a symlink. */
function readSide(at: string | Buffer | object): Side {
  if (typeof at !== 'string' && !Buffer.isBuffer(at)) return { absent: true };
  let fd: number;
  try {
    fd = openSync(at, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  } catch {
    return { absent: true };
  }
  try {
    const st = fstatSync(fd);
    if (!st.isFile()) return { absent: true };
    if (st.size > MAX_DIFF_BYTES) return { tooBig: true, size: st.size };
    const buf = Buffer.alloc(st.size);
    let got = 0;
    while (got < st.size) {
      const n = readSync(fd, buf, got, st.size - got, null);
      if (n === 0) break;
      got += n;
    }
    const data = buf.subarray(0, got);
    if (data.subarray(0, SNIFF_BYTES).includes(0)) return { binary: true, size: got };
    return { text: data.toString('utf8') };
  } finally {
    closeSync(fd);
  }
}

const sizeOf = (s: Side) => ('size' in s ? s.size : 'text' in s ? Buffer.byteLength(s.text) : 0);
const octal = (mode: number | undefined) => `0${(mode ?? 0).toString(8)}`;
