import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  linkSync,
  lstatSync,
  openSync,
  readlinkSync,
  unlinkSync,
  readSync,
  renameSync,
  rmSync,
  symlinkSync,
  writeSync,
  type BigIntStats,
} from 'node:fs';
import { permissions, typeOf } from './overlay.js';
import type { Fingerprint, FileType } from './types.js';

/** What a path holds, exactly enough to tell later whether it still does. */
export const fingerprint = (st: BigIntStats): Fingerprint => ({
  type: typeOf(st),
  dev: Number(st.dev),
  ino: st.ino.toString(),
  size: Number(st.size),
  mtimeNs: st.mtimeNs.toString(),
  mode: permissions(st),
});

/** Whether a path still holds what a fingerprint recorded (a directory: the same one). */
export function holds(st: BigIntStats, fp: Fingerprint): boolean {
  const now = fingerprint(st);
  if (now.type !== fp.type || now.dev !== fp.dev || now.ino !== fp.ino) return false;
  return fp.type === 'dir' || (now.size === fp.size && now.mtimeNs === fp.mtimeNs && now.mode === fp.mode);
}

const isExdev = (err: unknown) => (err as NodeJS.ErrnoException).code === 'EXDEV';

/**
 * Keep a file or symlink that is about to be replaced: a second link to it under `dest` (the
 * replacement then renames over the name, so the workspace never lacks the file), or, on
 * another filesystem, a copy that follows no symlink. `link` makes the link where the caller
 * reaches both names another way (apply: from the directories it holds).
 */
export function keepByLink(at: string | Buffer, dest: string, type: FileType, link = () => linkSync(at, dest)): void {
  try {
    link();
  } catch (err) {
    if (!isExdev(err)) throw err;
    if (type === 'symlink') symlinkSync(readlinkSync(at, { encoding: 'buffer' }), Buffer.from(dest));
    else copyNoFollow(at, dest, 0o600, true);
  }
}

/**
 * Move anything (a whole tree too) to `dest`, replacing what is there: a rename, or on another
 * filesystem a file or symlink made beside `dest` (its mode and owner kept) and renamed over it.
 */
export function move(at: string | Buffer, dest: string | Buffer): void {
  try {
    renameSync(at, dest);
  } catch (err) {
    if (!isExdev(err)) throw err;
    // Across file systems only a file or symlink is carried (opened without following, then unlinked):
    // copying and removing a tree by its names would follow a directory another session swaps for a symlink.
    const st = lstatSync(at);
    if (st.isDirectory()) throw new Error('a directory is not moved between file systems (the state directory and the workspace are on different ones): put stateDir on the workspace\'s file system');
    const beside = Buffer.concat([Buffer.isBuffer(dest) ? dest : Buffer.from(dest), Buffer.from(`.procctl-${process.pid}-${besides++}`)]);
    try {
      if (st.isSymbolicLink()) symlinkSync(readlinkSync(at, { encoding: 'buffer' }), beside);
      else copyNoFollow(at, beside, 0o600, true);
      renameSync(beside, dest);
    } catch (e) {
      rmSync(beside, { force: true });
      throw e;
    }
    unlinkSync(at);
  }
}

let besides = 0;

/**
 * Copy a regular file's bytes to a new file, refusing a symlink at `from`; returns what was read.
 * `same`: the copy takes the source's mode and (for root) owner, as a kept original must; a job's
 * file written into the workspace never does (apply decides its mode).
 */
export function copyNoFollow(from: string | Buffer, to: string | Buffer, mode = 0o600, same = false): BigIntStats {
  const src = openSync(from, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
  try {
    const st = fstatSync(src, { bigint: true });
    if (!st.isFile()) throw Object.assign(new Error('not a regular file'), { code: 'EINVAL' });
    const dst = openSync(to, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, mode);
    try {
      copyFd(src, dst);
      if (same) {
        if (process.getuid?.() === 0) fchownSync(dst, Number(st.uid), Number(st.gid));
        fchmodSync(dst, Number(st.mode) & 0o7777);
      }
    } finally {
      closeSync(dst);
    }
    return st;
  } finally {
    closeSync(src);
  }
}

let chunk: Buffer | undefined;

/** Copy from one descriptor to another to the end, through one reused 1 MiB buffer. */
function copyFd(src: number, dst: number): void {
  chunk ??= Buffer.allocUnsafe(1 << 20);
  for (;;) {
    const n = readSync(src, chunk, 0, chunk.length, null);
    if (n === 0) return;
    for (let off = 0; off < n; ) off += writeSync(dst, chunk, off, n - off);
  }
}
