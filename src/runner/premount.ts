import { chmodSync, chownSync, closeSync, openSync, statSync, type Stats } from 'node:fs';
import { join } from 'node:path';
import { mountSteps, type MountSteps } from '../sandbox/overlay.js';
import { nativeSpawner, type Addon } from './native.js';

/**
 * Review mode's overlay, mounted ahead of the session that will use it (SPEC §16). Mounting an
 * overlay makes several inodes in the upper directory's file system (the kernel's work
 * directories and its probes for whiteouts and tmpfiles), 0.2 ms on tmpfs, about 0.5 ms on a
 * journaled ext4, and 1-8 ms on an ext4 without a journal, where each new inode is checked
 * against the recently freed ones; all of it was on every review exec's path, while vfork held
 * the daemon's thread. So once a review session has started in a workspace, the namespaces for
 * the next one there are made in the background (native/spawn.c PrepareMounts: a user namespace
 * when the daemon is not root, a private mount namespace, the overlay on a spare review
 * directory), and the next review exec in that workspace joins them (two setns calls).
 *
 * A mount made ahead is used only while it is what the session would have made itself: the same
 * workspace directory (device and inode), the daemon's mounts unchanged since (its copy of the
 * mount table would hide a new mount and hold a removed one), and at most MAX_AGE_MS old; else it
 * is let go and the session mounts its own. A mount made ahead holds the daemon's mounts as they
 * were, so none is kept longer than that.
 */

export interface Ahead {
  /** The review directory its overlay writes into (a spare of changes/held.ts), for the session's begin. */
  dir: string;
  /** The namespaces as descriptors, for SpawnSteps.mounts.enter; the daemon's copies are closed once the job has them. */
  enter: { user: number; mnt: number };
}

/** The review keeper's spares (changes/held.ts), which the mounts made ahead write into. */
export interface SpareDirs {
  takeSpare(): string;
  dropSpare(dir: string): void;
}

interface Made extends Ahead {
  target: string;
  /** The workspace root as it was when the mount was made: the same directory, its mode and owner given to the upper root. */
  root: Root;
  /** The daemon's mount table's generation when it was made (mountsGeneration). */
  mounts: number;
  timer: NodeJS.Timeout;
}

/** The longest a review exec waits for a mount being made ahead. */
const SETTLE_MS = 250;

/** A mount made ahead and not taken within this time is let go. */
const MAX_AGE_MS = 30_000;

export class MountsAhead {
  private readonly ready = new Map<string, Made>();
  private readonly making = new Map<string, Promise<void>>();
  private closed = false;
  /** /proc/self/mountinfo, open while mounts are made ahead; and how many changes it has told of. */
  private mountinfo: number | undefined;
  private generation = 0;
  /** Made and taken so far, and why the last one could not be made (daemon.status, tests). */
  private made = 0;
  private taken = 0;
  private lastError: string | undefined;

  constructor(
    private readonly spares: SpareDirs,
    private readonly root = process.getuid?.() === 0,
    private readonly maxAgeMs = MAX_AGE_MS,
  ) {}

  /** For daemon.status.changes.ahead: how many were made and taken, how many wait or are being made, and why the last could not be made. */
  status(): { made: number; taken: number; ready: number; making: number; lastError?: string } {
    return { made: this.made, taken: this.taken, ready: this.ready.size, making: this.making.size, ...(this.lastError ? { lastError: this.lastError } : {}) };
  }


  /** The mount made ahead for `target` if it still is what a session would make now; taken (the caller closes its descriptors). */
  take(target: string): Ahead | undefined {
    const m = this.ready.get(target);
    if (!m) return undefined;
    this.ready.delete(target);
    clearTimeout(m.timer);
    if (!this.current(m)) {
      this.letGo(m);
      return undefined;
    }
    this.taken++;
    return { dir: m.dir, enter: m.enter };
  }

  /**
   * Settled when no mount is being made, or after `withinMs`: a review exec waits for one under
   * way (a few ms) rather than mount its own beside it, on the same inodes, for as long.
   */
  async settled(withinMs = SETTLE_MS): Promise<void> {
    if (this.making.size === 0) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, withinMs)));
    await Promise.race([Promise.all(this.making.values()), late]);
    clearTimeout(timer);
  }

  /** Make the next session's mount for `target` in the background, unless one is ready or under way. */
  prepare(target: string): void {
    const addon = aheadAddon();
    if (this.closed || this.ready.has(target) || this.making.has(target) || !addon) return;
    let dir: string | undefined;
    let root: Root;
    let mounts: number;
    try {
      mounts = this.mountsGeneration(addon);
      root = statSync(target);
      dir = this.spares.takeSpare();
      // Before the mount: the overlay's root inode takes its mode and owner from the upper root when mounted.
      showAsRoot(join(dir, 'upper'), root);
    } catch (err) {
      this.lastError = (err as Error).message;
      if (dir !== undefined) this.spares.dropSpare(dir);
      return;
    }
    const steps: MountSteps = mountSteps([{ target, upper: join(dir, 'upper'), work: join(dir, 'work') }], this.root);
    const making = addon.prepareMounts({ mounts: steps }).then(
      (enter) => {
        this.made++;
        const m: Made = { target, dir, enter, root, mounts, timer: setTimeout(() => this.expire(target, m), this.maxAgeMs) };
        m.timer.unref();
        if (this.closed) return this.letGo(m);
        this.ready.set(target, m);
      },
      (err: NodeJS.ErrnoException) => {
        this.lastError = `${err.syscall ?? 'prepareMounts'}: ${err.message}`;
        this.spares.dropSpare(dir);
      },
    );
    this.making.set(target, making);
    void making.finally(() => this.making.delete(target));
  }

  /** Let go of every mount made ahead (the daemon stops). */
  close(): void {
    this.closed = true;
    for (const m of this.ready.values()) {
      clearTimeout(m.timer);
      this.letGo(m);
    }
    this.ready.clear();
    if (this.mountinfo !== undefined) closeSync(this.mountinfo);
    this.mountinfo = undefined;
  }

  private expire(target: string, m: Made): void {
    if (this.ready.get(target) !== m) return;
    this.ready.delete(target);
    this.letGo(m);
  }

  /** Still what a session would mount: the same workspace directory, and the daemon's mounts as they were. */
  private current(m: Made): boolean {
    try {
      const now = statSync(m.target);
      const was = m.root;
      const addon = aheadAddon();
      return addon !== undefined && now.dev === was.dev && now.ino === was.ino && now.mode === was.mode && now.uid === was.uid && now.gid === was.gid && this.mountsGeneration(addon) === m.mounts;
    } catch {
      return false;
    }
  }

  /**
   * A number that moves whenever the daemon's mount table changes: the kernel marks an open
   * /proc/self/mountinfo once per change, which one poll reads (reading the table itself took
   * 0.1 ms with 20 mounts, more on a host with hundreds).
   */
  private mountsGeneration(addon: AheadAddon): number {
    this.mountinfo ??= openSync('/proc/self/mountinfo', 'r');
    if (addon.mountsChanged(this.mountinfo)) this.generation++;
    return this.generation;
  }

  /** Let go of a mount made ahead that was taken and not used (the session was refused). */
  letGo(m: Ahead): void {
    closeEnter(m.enter);
    this.spares.dropSpare(m.dir);
  }
}

type Root = Pick<Stats, 'dev' | 'ino' | 'mode' | 'uid' | 'gid'>;

type AheadAddon = Required<Pick<Addon, 'prepareMounts' | 'mountsChanged'>>;

/** The addon's two functions mounts made ahead need, or undefined where they cannot be made: the native spawner joins them (terminals and the fork fallback mount their own). */
function aheadAddon(): AheadAddon | undefined {
  const addon = nativeSpawner();
  if (addon instanceof Error || !addon.prepareMounts || !addon.mountsChanged) return undefined;
  return addon as AheadAddon;
}

/**
 * An overlay's upper root given the workspace root's mode and owner, so the job sees its
 * workspace as it is: they are the workspace's own. Before the overlay is mounted: its root takes
 * them from the upper root then (a change after is shown by stat, not used for access).
 */
export function showAsRoot(upper: string, root: Root): void {
  chmodSync(upper, root.mode & 0o7777);
  if (process.getuid?.() === 0) chownSync(upper, root.uid, root.gid);
}

/** Close the daemon's copies of a mount's namespaces. */
export function closeEnter(enter: { user: number; mnt: number }): void {
  closeSync(enter.mnt);
  if (enter.user >= 0) closeSync(enter.user);
}
