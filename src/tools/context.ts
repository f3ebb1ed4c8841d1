import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Registry } from '../session/registry.js';
import type { ScratchDirs } from '../runner/scratch.js';
import type { Session } from '../session/session.js';
import type { DiskHealth, DiskState } from '../session/disk.js';
import type { Voice } from './voice.js';

/** Where a session's durable files live (the daemon's state directory). */
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

/** What the daemon gives every tool call. */
export interface Daemon {
  registry: Registry;
  /** The config in force (it may be reloaded, so read it per call). */
  config(): Config;
  socketPath: string;
  /** Where per-session files (stop files, scratch dirs) live. */
  runtimeDir: string;
  /** Scratch directories for sessions (PROCCTL_TMPDIR). */
  scratch: ScratchDirs;
  log: Logger;
  /** Durable records and output spools (SPEC §10). */
  state: SessionFiles;
  /** Called once a session's processes exist, so the daemon can protect them against its own crash. */
  watch(session: Session): void;
  /** Make sure a running session's record is on disk now. */
  record(session: Session): void;
  /**
   * Keep the record of a session that has no process on disk (one waiting for its approval, or
   * denied): written now and whenever it changes; a pending one before this returns.
   */
  hold(session: Session): void;
  /** True once shutdown has begun: new work is refused. */
  closing: boolean;
}

/** One request: who asks, a signal that aborts when the request is cancelled, and who reads its text. */
export interface CallContext {
  scope: string;
  signal: AbortSignal;
  /** How hints in texts name the next step (tools/voice.ts): the tools' own words, or procctl commands. */
  voice: Voice;
}
