import type { DiskHealth, DiskState } from './disk.js';
import type { Session } from './session.js';

/** Where sessions' durable files live (the daemon's state directory). */
export interface SessionFiles {
  readonly dir: string;
  spoolPath(id: string): string;
  /** Delete a session's record and spool, all or nothing (`unavailable` when the record cannot go). */
  remove(id: string): void;
  /** Told of every write's outcome (spools report here). */
  disk: DiskHealth;
  /** Whether the directory takes writes now (daemon.status). */
  status(): DiskState;
}

/** A persistent shell's command as a crash keeps it: the shell it runs in (that shell's own process's session id) and what its record does not say. */
export interface ShellCommandKept {
  box: string;
  timeoutSec: number;
}

/**
 * Who keeps sessions' records on disk and their processes known to the guardian (the daemon,
 * daemon/records.ts). The runner tells it of each session it starts; tools of each session that
 * never gets a process.
 */
export interface RecordKeeper {
  /**
   * A session's processes exist: protect them against the daemon's own crash (by its process
   * group, and by its `cgroup` directories where it has them) and keep its record (soon if it
   * runs on, at once with `now`, and whenever it changes). `handedOver`: a session a planned
   * restart handed to this image, whose record the old image has just written and whose
   * descriptors the guardian that never stopped already holds: both are given again only once
   * this image serves (`afterServing`), or at its first change if that comes sooner.
   */
  watch(session: Session, opts?: { now?: boolean; cgroup?: string[]; shell?: ShellCommandKept; handedOver?: { startTime?: number } }): void;
  /**
   * A persistent shell's own process (SPEC §20), which has no record: protect it against the
   * daemon's crash as a session, and (durability.onCrash "keep") let the guardian keep its
   * descriptors with `describe()` (the shell as a crash's next daemon rebuilds it).
   */
  guard?(session: Session, describe: () => unknown): void;
  /**
   * Keep the record of a session that has no process (one waiting for its approval, or denied):
   * written now and whenever it changes; a pending one before this returns.
   */
  hold(session: Session): void;
}
