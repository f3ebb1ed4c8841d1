import { closeSync, constants, fstatSync, lstatSync, openSync, type BigIntStats } from 'node:fs';
import { baseOf, parentOf, shown, under, type RelPath } from './paths.js';

/** A directory of the workspace as apply reaches it, or why it cannot. */
export type DirState = { fd: number } | { absent: true } | { why: string };

// libuv opens every descriptor close-on-exec.
const OPEN_DIR = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;
// Beyond this many open directories the cache starts over rather than run out of descriptors.
const MAX_OPEN = 256;

/**
 * The workspace's directories, each opened one component at a time from the root, never
 * following a symlink (O_NOFOLLOW|O_DIRECTORY), and held open. Everything under a directory is
 * then named through its descriptor (/proc/self/fd/N/name), so a component replaced by a
 * symlink after it was opened cannot send a write outside: the name resolves in the directory
 * that was checked, wherever it is now.
 */
export class WorkspaceDirs {
  private readonly open = new Map<RelPath, DirState>();
  private readonly stats = new Map<RelPath, BigIntStats>();

  constructor(readonly root: string) {}

  /** The directory `rel` ('' is the root), opened safely, or why it cannot be. */
  dir(rel: RelPath): DirState {
    const known = this.open.get(rel);
    if (known) return known;
    if (this.open.size >= MAX_OPEN) this.close();
    let state: DirState;
    if (rel === '') state = openAt(this.root, '');
    else {
      const parent = this.dir(parentOf(rel));
      state = 'fd' in parent ? openAt(`/proc/self/fd/${parent.fd}`, baseOf(rel), rel) : parent;
    }
    this.open.set(rel, state);
    return state;
  }

  /** Where fs calls reach `rel` through its parent's descriptor; a DirState when they cannot. */
  at(rel: RelPath): string | Buffer | Exclude<DirState, { fd: number }> {
    const parent = this.dir(parentOf(rel));
    if (!('fd' in parent)) return 'why' in parent ? parent : { why: `its directory ${shown(parentOf(rel))} is not in the workspace` };
    return named(parent.fd, baseOf(rel));
  }

  /** The parent directory's own stat (for the owner of what is made in it), read once while it is open. */
  parentStat(rel: RelPath): BigIntStats | undefined {
    const key = parentOf(rel);
    const known = this.stats.get(key);
    if (known) return known;
    const parent = this.dir(key);
    if (!('fd' in parent)) return undefined;
    const st = fstatSync(parent.fd, { bigint: true });
    this.stats.set(key, st);
    return st;
  }

  /** Forget `rel` and everything under it: it was moved, replaced or made anew. */
  forget(rel: RelPath): void {
    for (const [key, state] of this.open) {
      if (key === rel || rel === '' || key.startsWith(`${rel}/`)) {
        if ('fd' in state) closeSync(state.fd);
        this.open.delete(key);
        this.stats.delete(key);
      }
    }
  }

  close(): void {
    for (const state of this.open.values()) if ('fd' in state) closeSync(state.fd);
    this.open.clear();
    this.stats.clear();
  }
}

/** `/proc/self/fd/N/name` for a name in an open directory, as a Buffer when not UTF-8. */
export const named = (fd: number, base: RelPath) => under(`/proc/self/fd/${fd}`, base);

function openAt(dir: string, base: RelPath, rel = ''): DirState {
  const path = base === '' ? dir : under(dir, base);
  try {
    return { fd: openSync(path, rel === '' ? constants.O_RDONLY | constants.O_DIRECTORY : OPEN_DIR) };
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return { absent: true };
    // With O_DIRECTORY the kernel answers ENOTDIR for a symlink too: ask which it is.
    const symlink = code === 'ELOOP' || (code === 'ENOTDIR' && lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink());
    if (symlink) return { why: `${shown(rel)} is a symlink in the workspace (not written through)` };
    if (code === 'ENOTDIR') return { why: `${shown(rel)} is not a directory in the workspace` };
    return { why: `${shown(rel || '.')} cannot be opened (${code ?? (err as Error).message})` };
  }
}
