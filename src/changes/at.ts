import { addonFix, errnoName, loadAddon } from '../base/addon.js';
import { unavailable } from '../base/errors.js';
import type { FileType, Fingerprint } from './types.js';

/** A name in a directory apply holds open: its bytes as a string, or a Buffer when not UTF-8. */
type Name = string | Buffer;

/** What apply needs of an entry it is about to replace: `fstatat` without following a symlink. */
export interface EntryStat {
  type: FileType;
  uid: number;
  gid: number;
  mode: number;
}

interface AtAddon {
  writeBeside(fromDir: number, fromName: Name, dir: number, tmpName: Name, mode: number, uid: number, gid: number, fsync: boolean): Omit<Fingerprint, 'type'> | null;
  statAt(dir: number, name: Name): EntryStat | null;
  linkAt(dir: number, name: Name, toDir: number, toName: Name): void;
  renameAt(dir: number, name: Name, toDir: number, toName: Name): void;
}

let addon: AtAddon | undefined;

function at(): AtAddon {
  if (!addon) {
    const found = loadAddon<AtAddon>(['writeBeside', 'statAt', 'linkAt', 'renameAt']);
    if (found instanceof Error) throw unavailable(`cannot apply a review's changes: ${found.message}; ${addonFix()}`);
    addon = found;
  }
  return addon;
}

/** The addon's errors carry `errno`; apply (and what reads its answers) names them by `code`, as Node's own. */
function coded<T>(call: () => T): T {
  try {
    return call();
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    if (typeof e.errno === 'number' && e.code === undefined) e.code = errnoName(e.errno);
    throw err;
  }
}

/**
 * The upper file `fromName` (in the directory `fromDir`) copied to a new file `tmpName` in `dir`:
 * its bytes, `mode`, the owner given (uid -1 leaves it), its times to the nanosecond, fsynced when
 * asked. What was written, or null when the upper entry is not a regular file (nothing is made).
 * Every name is opened from its directory's descriptor, never followed as a symlink; on a failure
 * the new file is gone.
 */
export function writeBeside(fromDir: number, fromName: Name, dir: number, tmpName: Name, mode: number, owner: { uid: number; gid: number } | undefined, fsync: boolean): Fingerprint | null {
  const wrote = coded(() => at().writeBeside(fromDir, fromName, dir, tmpName, mode, owner?.uid ?? -1, owner?.gid ?? -1, fsync));
  return wrote && { type: 'file', ...wrote };
}

/** The entry `name` in `dir`, a symlink as itself; undefined when there is none. */
export const statAt = (dir: number, name: Name): EntryStat | undefined => coded(() => at().statAt(dir, name)) ?? undefined;

/** A second name `toName` in `toDir` for the entry `name` in `dir` (a symlink as itself). */
export const linkAt = (dir: number, name: Name, toDir: number, toName: Name): void => coded(() => at().linkAt(dir, name, toDir, toName));

/** `renameat`: `name` in `dir` becomes `toName` in `toDir`, replacing what is there. */
export const renameAt = (dir: number, name: Name, toDir: number, toName: Name): void => coded(() => at().renameAt(dir, name, toDir, toName));
