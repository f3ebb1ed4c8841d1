import type { BigIntStats, Dirent, Stats } from 'node:fs';
import { addonFix, loadAddon } from '../base/addon.js';
import { unavailable } from '../base/errors.js';
import type { FileType } from './types.js';

/**
 * The overlayfs formats an upper directory is read in. A mount made by real root keeps its marks
 * in `trusted.overlay.*`; one made in a user namespace (the `userxattr` option) in
 * `user.overlay.*`. Only the mount's own namespace is read: a job can write `user.*` attributes
 * on its files, and the kernel escapes the ones it writes in its own format, so a mark in the
 * other namespace is the job's, not the kernel's.
 */
export type XattrFormat = 'trusted' | 'user';

interface XattrAddon {
  getxattr(path: string | Buffer, name: string): Buffer | null;
}

let addon: XattrAddon | undefined;

/** lgetxattr through the project's addon; null when the path has no such attribute. */
export function getxattr(path: string | Buffer, name: string): Buffer | null {
  if (!addon) {
    const found = loadAddon<XattrAddon>(['getxattr']);
    if (found instanceof Error) throw unavailable(`cannot read an overlay's upper directory: ${found.message}; ${addonFix()}`);
    addon = found;
  }
  return addon.getxattr(path, name);
}

/** Whether an upper directory hides the lower one whole (`rm -rf d && mkdir d`). */
export const isOpaque = (path: string | Buffer, format: XattrFormat) => getxattr(path, `${format}.overlay.opaque`)?.toString() === 'y';

/**
 * A mark that changes where an entry's content comes from, which this reader does not follow:
 * `redirect` (a renamed directory, redirect_dir=on) and `metacopy` (data still in the lower
 * file, metacopy=on). Both are off by default and the daemon's mounts leave them off. The
 * `origin`, `impure` and `uuid` marks the kernel does write only help it keep inode numbers; the
 * content is the upper entry's either way, so they are not read.
 */
export function foreignMark(path: string | Buffer, st: BigIntStats, format: XattrFormat): string | undefined {
  if (st.isDirectory() && getxattr(path, `${format}.overlay.redirect`) !== null) return 'redirect';
  // A metacopy file holds no data of its own: only a file without blocks can be one.
  if (st.isFile() && st.blocks === 0n && st.size > 0n && getxattr(path, `${format}.overlay.metacopy`) !== null) return 'metacopy';
  return undefined;
}

/** A whiteout: a character device 0/0 (how overlayfs records a deletion). */
export const isWhiteout = (st: Stats | BigIntStats) => st.isCharacterDevice() && Number(st.rdev) === 0;

export function typeOf(st: Stats | BigIntStats | Dirent): FileType {
  if (st.isFile()) return 'file';
  if (st.isDirectory()) return 'dir';
  if (st.isSymbolicLink()) return 'symlink';
  if (st.isFIFO()) return 'fifo';
  if (st.isSocket()) return 'socket';
  if (st.isCharacterDevice()) return 'char';
  return 'block';
}

/** Permission bits with setuid, setgid and sticky: what `mode` means in changes and plans. */
export const permissions = (st: Stats | BigIntStats) => Number(st.mode) & 0o7777;
