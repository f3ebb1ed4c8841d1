import { openSync, readdirSync, readFileSync, statfsSync, statSync, type Dirent, type Stats } from 'node:fs';
import { loadAddon } from '../base/addon.js';
import { closeQuietly } from '../base/close-quietly.js';

/** The addon's directory watches (native/dirwatch.c) and its look at the mount table (native/spawn.c). */
export interface WatchAddon {
  dirWatchOpen(): number;
  dirWatchAdd(fd: number, path: string): number;
  dirWatchDrain(fd: number): (number | string)[];
  mountsChanged(fd: number): boolean;
}

/**
 * A listing kept. Watched (`wd`): exact until an event says otherwise, and trusted without a look
 * only when reached again from the same watched directory it was read from (`parent`, in the same
 * inotify instance, `epoch`). Else checked by its directory's device, inode and ctime at each use.
 */
interface Kept {
  entries: readonly Dirent[];
  dev: number;
  ino: number;
  wd?: number;
  parent?: number;
  epoch?: number;
  ctimeMs?: number;
  /** It holds a name that is not UTF-8: what is under that name cannot be named to bind. */
  unreadable?: boolean;
}

export interface Listing {
  /** Its directory's path, as listed. */
  path: string;
  entries: readonly Dirent[];
  /** Whether the listing is exact until the next refresh() moves `generation`. */
  watched: boolean;
  /** What is in it cannot be known or named (it cannot be read, or holds a name that is not UTF-8): read-only whole. */
  unreadable?: boolean;
  /** It could not be looked at (the directory above it cannot be searched): the one above is read-only whole. */
  unreachable?: boolean;
  /** Its path is longer than the system takes. */
  tooLong?: boolean;
  wd?: number;
  epoch?: number;
}

const MAX_LISTINGS = 50_000;
/** A listing checked by ctime is kept only when the directory's last change is older than this at the read. */
const SETTLED_MS = 2000;
/** The most of the user's inotify watches the daemon takes (fs.inotify.max_user_watches is shared with editors and builds). */
const WATCH_SHARE = 0.25;
/** File systems another host changes without this kernel knowing (statfs f_type): their directories are checked by ctime. */
const REMOTE = new Set([0x6969 /* nfs */, 0x517b /* smb */, 0xff534d42 /* cifs */, 0xfe534d42 /* smb2 */, 0x65735546 /* fuse */, 0x01021997 /* 9p */, 0x00c36400 /* ceph */, 0x47504653 /* gpfs */, 0x0bd00bd0 /* lustre */]);

// inotify's event bits (linux/inotify.h).
const IN_ATTRIB = 0x4;
const IN_DELETE = 0x200;
const IN_MOVED_FROM = 0x40;
const IN_MOVED_TO = 0x80;
const IN_DELETE_SELF = 0x400;
const IN_MOVE_SELF = 0x800;
const IN_IGNORED = 0x8000;
const IN_ISDIR = 0x40000000;

/** `dir/name` for a directory already absolute and normal (path.join normalises again: slower, in a walk of thousands). */
export const child = (dir: string, name: string): string => (dir.endsWith('/') ? dir + name : `${dir}/${name}`);

/**
 * Directories' listings, kept between uses while nothing changed them (for the sandbox's protect
 * walk, SPEC §12, which lists the same trees at every sandboxed start). A listing is kept exact by
 * an inotify watch on its directory, added before the directory is read and read back on the
 * caller's thread at each refresh(). What lets go of kept listings:
 * - an entry made, removed or renamed in a directory: its listing;
 * - a directory removed, renamed away or renamed over, named in its parent's event (its own
 *   event waits while a process holds it open): every listing at and under its path;
 * - a directory's own removal or rename: every listing at and under its path;
 * - a change to the daemon's mount table, or the kernel's queue overflowing: all of them.
 * A watched listing is trusted without a look only when reached from the watched directory it was
 * read from, so every directory between it and its tree's root is watched; reached otherwise (read
 * as a root before, or the directory above read anew), its device and inode are looked at first.
 * A tree's root is looked at every time (a rename above it gives its path to another directory,
 * with no event under it). Where no watch can be had (no addon, the user's watches spent, a
 * network file system another host changes), a listing is checked by its directory's device,
 * inode and ctime at each use instead, and kept only once the directory has been still for
 * SETTLED_MS (a change in the same tick of the file system's clock as the read would leave the
 * ctime as it was).
 */
export class Listings {
  private readonly kept = new Map<string, Kept>();
  /** The directories kept under each path (by the path above theirs), so a subtree is let go in its own size. */
  private readonly below = new Map<string, Set<string>>();
  /** The paths listed through each watch (the same directory can be reached by two paths, through a bind mount). */
  private readonly watched = new Map<number, Set<string>>();
  /** Each tree root's directory as last looked at. */
  private readonly roots = new Map<string, { dev: number; ino: number }>();
  private local = new Map<number, boolean>();
  private fd: number | undefined;
  private mountinfo: number | undefined;
  /** Unknown until the first watch is wanted (the addon and the user's limit are looked up then). */
  private watchBudget: number | undefined;
  private watchesHeld = 0;
  private addon: WatchAddon | undefined;
  /** Which inotify instance: a listing watched in an earlier one (before a clear) is not. */
  private epoch = 0;
  /** Moves whenever a watched listing is let go: an answer made only of watched listings holds while it stays. */
  generation = 0;

  /** `watch` false: every listing checked by ctime; `watches`: the most watches held (by default a share of the user's). */
  constructor(private readonly opts: { watch?: boolean; watches?: number } = {}) {
    if (opts.watch === false) this.watchBudget = 0;
  }

  /** Take in every change the kernel has queued: the listings they touched are let go. */
  refresh(): void {
    if (this.fd === undefined || this.addon === undefined) return;
    if (this.mountinfo !== undefined && this.addon.mountsChanged(this.mountinfo)) return this.clear();
    let events: (number | string)[];
    try {
      events = this.addon.dirWatchDrain(this.fd);
    } catch {
      // Events read before the failure are gone with it: nothing kept can be trusted.
      return this.clear();
    }
    for (let i = 0; i < events.length; i += 3) {
      const wd = events[i] as number;
      const mask = events[i + 1] as number;
      const name = events[i + 2] as string;
      // The kernel dropped events (IN_Q_OVERFLOW): nothing kept can be trusted.
      if (wd === -1) return this.clear();
      const paths = this.watched.get(wd);
      if (paths === undefined) continue;
      if (mask & IN_ATTRIB) {
        // A mode or owner changed: what the walk may list of a directory (its own, or an entry's that is one); a file's is nothing to it.
        if (name !== '' && !(mask & IN_ISDIR)) continue;
        this.generation++;
        for (const path of paths) this.kept.delete(name === '' ? path : child(path, name));
        continue;
      }
      this.generation++;
      for (const path of paths) {
        this.kept.delete(path);
        if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) this.dropUnder(path);
        else if (mask & IN_ISDIR && mask & (IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO) && name !== '') this.dropUnder(child(path, name));
      }
      if (mask & IN_IGNORED) {
        this.watched.delete(wd);
        this.watchesHeld--;
      }
    }
  }

  /**
   * Let go of what was listed at and under a tree's root when its path now names another
   * directory than the last time it was looked at (renamed above it: no watch under it sees that).
   */
  checkRoot(root: string): void {
    let st: Stats | undefined;
    try {
      st = statSync(root, { throwIfNoEntry: false });
    } catch {
      st = undefined;
    }
    const was = this.roots.get(root);
    if (st === undefined) {
      if (was !== undefined) this.dropRoot(root);
      return;
    }
    if (was !== undefined && was.dev === st.dev && was.ino === st.ino) return;
    if (was !== undefined) this.dropRoot(root);
    this.roots.set(root, { dev: st.dev, ino: st.ino });
  }

  /**
   * A directory's entries, as now (after refresh() and checkRoot() of its tree's root); none where
   * it is not a directory. `from`: how the walk reached it, its tree's root or the listing of the
   * directory above. Below a root a directory is watched only where the one above is (in this
   * instance), so every directory between a watched listing and its root is watched too.
   */
  list(dir: string, from: 'root' | Listing): Listing {
    // Before anything is read of the directory above: after a clear its watch is another instance's.
    if (this.kept.size >= MAX_LISTINGS) this.clear();
    const above = from === 'root' ? undefined : from.watched && from.epoch === this.epoch ? from.wd : undefined;
    const known = this.kept.get(dir);
    if (known?.wd !== undefined && known.epoch === this.epoch && above !== undefined && known.parent === above) return this.listing(dir, known);
    let st: Stats | undefined;
    try {
      st = statSync(dir, { throwIfNoEntry: false });
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOTDIR') return { path: dir, entries: [], watched: false };
      if (code === 'ENAMETOOLONG') return { path: dir, entries: [], watched: false, tooLong: true };
      return { path: dir, entries: [], watched: false, unreachable: true };
    }
    if (!st?.isDirectory()) return { path: dir, entries: [], watched: false };
    if (known && known.dev === st.dev && known.ino === st.ino) {
      if (known.wd !== undefined && known.epoch === this.epoch) {
        // The same directory, reached another way: from here on, through this way's watched directory.
        known.parent = above;
        return this.listing(dir, known);
      }
      if (known.wd === undefined && known.ctimeMs === st.ctimeMs) return this.listing(dir, known);
    }
    if (known?.wd !== undefined) this.dropUnder(dir);
    const wd = from === 'root' || above !== undefined ? this.watch(dir, st.dev) : undefined;
    let entries: Dirent[];
    let unreadable = false;
    try {
      // As bytes: a name that is not UTF-8 would come back as another name, and what is in it be missed.
      const raw = readdirSync(dir, { withFileTypes: true, encoding: 'buffer' });
      for (const e of raw) {
        const name = e.name.toString('utf8');
        if (!Buffer.from(name, 'utf8').equals(e.name)) unreadable = true;
        (e as unknown as { name: string }).name = name;
      }
      entries = raw as unknown as Dirent[];
    } catch {
      return { path: dir, entries: [], watched: false, unreadable: true };
    }
    const read: Kept = { entries, dev: st.dev, ino: st.ino, ...(unreadable ? { unreadable } : {}) };
    if (wd !== undefined) this.keep(dir, { ...read, wd, parent: above, epoch: this.epoch });
    else if (Date.now() - st.ctimeMs > SETTLED_MS) this.keep(dir, { ...read, ctimeMs: st.ctimeMs });
    else this.kept.delete(dir);
    return this.listing(dir, this.kept.get(dir) ?? read);
  }

  /** Let go of every listing and watch. */
  clear(): void {
    this.generation++;
    this.epoch++;
    this.kept.clear();
    this.below.clear();
    this.watched.clear();
    this.roots.clear();
    // Device numbers of file systems mounted since may be another kind's now.
    this.local = new Map();
    this.watchesHeld = 0;
    if (this.fd !== undefined) {
      closeQuietly(this.fd);
      this.fd = undefined;
    }
  }

  /** Let go of the listings and watches held (the daemon's shutdown, a test's end). */
  close(): void {
    this.clear();
    if (this.mountinfo !== undefined) closeQuietly(this.mountinfo);
    this.mountinfo = undefined;
  }

  /** What the walk is told of a listing: watched where it has a watch of this instance. */
  private listing(dir: string, kept: Kept): Listing {
    const watched = kept.wd !== undefined && kept.epoch === this.epoch;
    return { path: dir, entries: kept.entries, watched, ...(watched ? { wd: kept.wd, epoch: kept.epoch } : {}), ...(kept.unreadable ? { unreadable: true } : {}) };
  }

  private dropRoot(root: string): void {
    this.generation++;
    this.roots.delete(root);
    this.dropUnder(root);
  }

  /** A watch on `dir` (before it is read), or undefined where it is checked by ctime instead. */
  private watch(dir: string, dev: number): number | undefined {
    if (this.watchBudget === undefined) {
      this.addon = watchAddon();
      this.watchBudget = this.addon === undefined ? 0 : (this.opts.watches ?? watchBudget());
    }
    if (this.addon === undefined || this.watchesHeld >= this.watchBudget || !this.isLocal(dir, dev)) return undefined;
    if (this.fd === undefined) {
      try {
        // The mount table as it is before the first watch: a mount over a watched directory changes what is under its path with no event in it.
        this.mountinfo ??= openSync('/proc/self/mountinfo', 'r');
        this.fd = this.addon.dirWatchOpen();
      } catch {
        // The user's inotify instances spent: every listing is checked by ctime.
        this.watchBudget = 0;
        return undefined;
      }
    }
    const wd = this.addon.dirWatchAdd(this.fd, dir);
    if (wd <= 0) return undefined;
    let paths = this.watched.get(wd);
    if (paths === undefined) {
      this.watched.set(wd, (paths = new Set()));
      this.watchesHeld++;
    }
    paths.add(dir);
    return wd;
  }

  private isLocal(dir: string, dev: number): boolean {
    let local = this.local.get(dev);
    if (local === undefined) {
      try {
        local = !REMOTE.has(Number(statfsSync(dir).type));
      } catch {
        local = false;
      }
      this.local.set(dev, local);
    }
    return local;
  }

  private keep(dir: string, kept: Kept): void {
    this.kept.set(dir, kept);
    if (dir === '/') return;
    const cut = dir.lastIndexOf('/');
    const up = cut === 0 ? '/' : dir.slice(0, cut);
    let set = this.below.get(up);
    if (set === undefined) this.below.set(up, (set = new Set()));
    set.add(dir);
  }

  /** Let go of the listing of `path` and of every directory under it. */
  private dropUnder(path: string): void {
    this.kept.delete(path);
    const set = this.below.get(path);
    if (set === undefined) return;
    this.below.delete(path);
    for (const dir of set) this.dropUnder(dir);
  }
}

function watchAddon(): WatchAddon | undefined {
  const found = loadAddon<WatchAddon>(['dirWatchOpen', 'dirWatchAdd', 'dirWatchDrain', 'mountsChanged']);
  return found instanceof Error ? undefined : found;
}

/** A share of fs.inotify.max_user_watches (8,192 on older kernels when it cannot be read). */
function watchBudget(): number {
  let max = 8192;
  try {
    max = Number.parseInt(readFileSync('/proc/sys/fs/inotify/max_user_watches', 'utf8'), 10) || max;
  } catch {
    // The older kernels' default.
  }
  return Math.min(MAX_LISTINGS, Math.floor(max * WATCH_SHARE));
}
