import { closeSync, openSync, readdirSync, readFileSync, statfsSync, statSync, type Dirent } from 'node:fs';
import { loadAddon } from '../base/addon.js';
import { closeQuietly } from '../base/close-quietly.js';

/** The addon's directory watches (native/dirwatch.c) and its look at the mount table (native/spawn.c). */
export interface WatchAddon {
  dirWatchOpen(): number;
  dirWatchAdd(fd: number, path: string): number;
  dirWatchDrain(fd: number): (number | string)[];
  mountsChanged(fd: number): boolean;
}

/** A listing kept: watched (exact until an event says otherwise), or checked by its directory's ctime at each use. */
interface Kept {
  entries: readonly Dirent[];
  wd?: number;
  dev?: number;
  ino?: number;
  ctimeMs?: number;
}

export interface Listing {
  entries: readonly Dirent[];
  /** Whether the listing is exact until the next refresh() moves `generation`. */
  watched: boolean;
}

const MAX_LISTINGS = 50_000;
/** A listing checked by ctime is kept only when the directory's last change is older than this at the read. */
const SETTLED_MS = 2000;
/** The most of the user's inotify watches the daemon takes (fs.inotify.max_user_watches is shared with editors and builds). */
const WATCH_SHARE = 0.25;
/** File systems another host changes without this kernel knowing (statfs f_type): their directories are checked by ctime. */
const REMOTE = new Set([0x6969 /* nfs */, 0x517b /* smb */, 0xff534d42 /* cifs */, 0xfe534d42 /* smb2 */, 0x65735546 /* fuse */, 0x01021997 /* 9p */, 0x00c36400 /* ceph */, 0x47504653 /* gpfs */, 0x0bd00bd0 /* lustre */]);

// inotify's event bits (linux/inotify.h).
const IN_DELETE_SELF = 0x400;
const IN_MOVE_SELF = 0x800;
const IN_IGNORED = 0x8000;

/**
 * Directories' listings, kept between uses while nothing changed them (for the sandbox's protect
 * walk, SPEC §12, which lists the same trees at every sandboxed start). A listing is kept exact by
 * an inotify watch on its directory, added before the directory is read and read back on the
 * caller's thread at each refresh(): an entry made, removed or renamed there lets go of it, and a
 * directory renamed or removed lets go of every listing under its path, so the next walk reads
 * them again; a change to the daemon's mount table lets go of all. Where no watch can be had (no
 * addon, the user's watches spent, a network file system another host changes), a listing is
 * checked by its directory's device, inode and ctime at each use instead, and kept only once the
 * directory has been still for SETTLED_MS (a change in the same tick of the file system's clock as
 * the read would leave the ctime as it was).
 */
export class Listings {
  private readonly kept = new Map<string, Kept>();
  /** The paths listed through each watch (the same directory can be reached by two paths, through a bind mount). */
  private readonly watched = new Map<number, Set<string>>();
  private readonly local = new Map<number, boolean>();
  private fd: number | undefined;
  private mountinfo: number | undefined;
  /** Unknown until the first watch is wanted (the addon and the user's limit are looked up then). */
  private watchBudget: number | undefined;
  private watchesHeld = 0;
  /** Moves whenever a watched listing is let go: an answer made only of watched listings holds while it stays. */
  generation = 0;

  private addon: WatchAddon | undefined;

  /** `watch` false: every listing checked by ctime; `watches`: the most watches held (by default a share of the user's). */
  constructor(private readonly opts: { watch?: boolean; watches?: number } = {}) {
    if (opts.watch === false) this.watchBudget = 0;
  }

  /** Take in every change the kernel has queued: the listings they touched are let go. */
  refresh(): void {
    if (this.fd === undefined || this.addon === undefined) return;
    if (this.mountinfo !== undefined && this.addon.mountsChanged(this.mountinfo)) return this.clear();
    const events = this.addon.dirWatchDrain(this.fd);
    for (let i = 0; i < events.length; i += 3) {
      const wd = events[i] as number;
      const mask = events[i + 1] as number;
      // The kernel dropped events (IN_Q_OVERFLOW): nothing kept can be trusted.
      if (wd === -1) return this.clear();
      const paths = this.watched.get(wd);
      if (paths === undefined) continue;
      this.generation++;
      for (const path of paths) {
        this.kept.delete(path);
        // The directory itself renamed or removed: its path, and every path under it, name other directories now.
        if (mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) this.dropUnder(path);
      }
      if (mask & IN_IGNORED) {
        this.watched.delete(wd);
        this.watchesHeld--;
      }
    }
  }

  /**
   * A directory's entries, as now (after refresh()); none where it is not a readable directory.
   * `from`: how the walk reached it. A root is looked at anew each time (its path can be given to
   * another directory by a rename above it, which no watch under it sees); below it, a directory
   * is watched only where the one it was listed from is, so every directory between a watched
   * listing and its root is watched too, and a rename or removal of any of them lets go of it.
   */
  list(dir: string, from: 'root' | Listing): Listing {
    if (from === 'root') this.checkRoot(dir);
    const known = this.kept.get(dir);
    if (known?.wd !== undefined) return { entries: known.entries, watched: true };
    const st = statSync(dir, { throwIfNoEntry: false });
    if (!st?.isDirectory()) return { entries: [], watched: false };
    if (known && known.dev === st.dev && known.ino === st.ino && known.ctimeMs === st.ctimeMs) return { entries: known.entries, watched: false };
    if (this.kept.size >= MAX_LISTINGS) this.clear();
    const wd = from === 'root' || from.watched ? this.watch(dir, st.dev) : undefined;
    let entries: Dirent[];
    try {
      entries = readdirSync(dir, { withFileTypes: true });
    } catch {
      return { entries: [], watched: false };
    }
    if (wd !== undefined) {
      this.kept.set(dir, { entries, wd, dev: st.dev, ino: st.ino });
      return { entries, watched: true };
    }
    if (Date.now() - st.ctimeMs > SETTLED_MS) this.kept.set(dir, { entries, dev: st.dev, ino: st.ino, ctimeMs: st.ctimeMs });
    else this.kept.delete(dir);
    return { entries, watched: false };
  }

  /** Let go of what was listed at and under `root` when its path now names another directory than the one watched (renamed above it: no watch under it sees that). */
  checkRoot(root: string): void {
    const known = this.kept.get(root);
    if (known?.wd === undefined) return;
    const st = statSync(root, { throwIfNoEntry: false });
    if (st?.dev === known.dev && st?.ino === known.ino) return;
    this.generation++;
    this.dropUnder(root);
  }

  /** Let go of every listing and watch. */
  clear(): void {
    this.generation++;
    this.kept.clear();
    this.watched.clear();
    this.watchesHeld = 0;
    if (this.fd !== undefined) {
      closeQuietly(this.fd);
      this.fd = undefined;
    }
  }

  /** Let go of the listings and watches held (the daemon's shutdown, a test's end). */
  close(): void {
    this.clear();
    if (this.mountinfo !== undefined) closeSync(this.mountinfo);
    this.mountinfo = undefined;
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

  /** Let go of the listing of `path` and of every directory under it. */
  private dropUnder(path: string): void {
    this.kept.delete(path);
    const prefix = path.endsWith('/') ? path : `${path}/`;
    for (const key of this.kept.keys()) if (key.startsWith(prefix)) this.kept.delete(key);
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
