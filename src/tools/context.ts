import type { ReviewSupport } from '../sandbox/overlay.js';
import type { HeldChanges } from '../changes/held.js';
import type { MountsAhead } from '../runner/premount.js';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Registry } from '../session/registry.js';
import type { ScratchDirs } from '../runner/scratch.js';
import type { LaunchContext } from '../runner/start.js';
import type { RecordKeeper, SessionFiles } from '../session/keeper.js';
import type { Cancellation } from '../base/cancellation.js';
import type { Voice } from '../schema/voice.js';
import type { RememberedRule } from '../policy/remembered.js';
import type { AuditBus, Client, Peer } from '../audit/events.js';
import type { TrailStatus } from '../audit/writer.js';
import type { Shells } from '../shells/shells.js';
import type { Restarts } from '../schema/restarts.js';

/** What the daemon gives every tool call. */
export interface Daemon extends LaunchContext {
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
  /** Keeps sessions' records and protects their processes against the daemon's crash. */
  keeper: RecordKeeper;
  /** True once shutdown has begun: new work is refused. */
  closing: boolean;
  /** True while a planned restart hands over (SPEC §19): new work is refused as `restarting`, waits answer now. */
  restarting: boolean;
  /** What `daemon.status.restarts` says (SPEC §19). */
  restarts: RestartCounts;
  /** Hand the running sessions to a new daemon image in this PID (SPEC §19); refuses, the old image serving on, when it cannot. */
  restart(): Promise<RestartAnswer>;
  /** The approver credential the daemon made beside its socket at start (SPEC §8), when the config names none. */
  approverMade: string | undefined;
  /** Answers a person chose to remember, as allow rules per scope (SPEC §8). */
  remembered: RememberedAnswers;
  /** The config file in use (null: none) and how the last reload went, for daemon.status. */
  configStatus(): { file: string | null; lastReload?: { at: string; ok: boolean; error?: string } };
  /** Whether review mode can run on this host (SPEC §16), probed off the thread at the first ask (known once probed). */
  /** `path`: the daemon's PATH, when the caller has read it already (each read of process.env makes a new string). */
  reviewSupport(path?: string): ReviewSupport | Promise<ReviewSupport>;
  /** The changes review sessions hold (SPEC §16). */
  held: HeldChanges;
  /** Review sessions' overlays mounted ahead of their exec (runner/premount.ts). */
  ahead?: MountsAhead;
  /** What happened that the audit trail and the metrics are told of (SPEC §18). */
  audit: AuditBus;
  /** The audit trail as far as verify, history and status need it. */
  trail: TrailView;
  /** The OpenTelemetry export (SPEC §18, docs/telemetry.md), for daemon.status. */
  telemetryStatus(): TelemetryStatus;
  /** The scopes' persistent shells (SPEC §20). */
  shells: Shells;
}

/** Restarts so far: planned (hand-overs) and after a crash, the last one's time and length, sessions adopted and lost. */
export type RestartCounts = Restarts;

/** What `daemon.restart` answers before the image goes: what is handed over, from and to which version. */
export interface RestartAnswer {
  sessions: number;
  from: string;
  to: string;
}

/** What `daemon.status.telemetry` says: where it sends, and how many spans and readings went and were dropped. */
export interface TelemetryStatus {
  /** The configured base URL, or null: off. */
  endpoint: string | null;
  /** Whether the OpenTelemetry SDK is loaded in this daemon: only when an endpoint is set. */
  sdk: boolean;
  /** Spans the receiver took. */
  exported: number;
  /** Spans given up on: the receiver refused them or could not be reached, or too many waited to be sent. */
  dropped: number;
  /** Readings of the metrics (each one of every instrument, cumulative) sent and given up on. */
  metrics: { exported: number; dropped: number };
  /** The last export that failed, and why; null when none has. */
  lastError: { at: string; signal: 'traces' | 'metrics'; message: string } | null;
}

/** The audit trail's writer as the tools see it (audit/writer.ts). */
export interface TrailView {
  readonly dir: string;
  readonly enabled: boolean;
  status(): TrailStatus;
  /** Everything told so far is written (or given up on, and counted). */
  flushed(): Promise<void>;
  lastWritten(): { seq: number; hash: string };
}

/** The remembered answers, kept in the state directory across restarts (daemon/remembered.ts). */
export interface RememberedAnswers {
  list(): readonly RememberedRule[];
  add(rules: RememberedRule[]): void;
  /** Forget rule N (1-based, as listed); the rule, or undefined when there is none. */
  remove(n: number): RememberedRule | undefined;
}

/** Who sent a request, as far as an approval needs to know (SPEC §8). */
export interface Caller {
  /** The peer's pid (SO_PEERCRED), or why it is not known; asked only when it matters. */
  pid(): number | { unknown: string };
  /** The request carried the approver credential. */
  approver: boolean;
  /** Which credential it was: the adminToken, or the approver's. */
  credential?: 'admin' | 'approver';
  /** Who asked, for the audit trail: the peer's credentials and executable, and what kind of client. */
  origin(): { peer: Peer | null; client: Client };
}

/** The client a request came from, as the tools see it (rpc/ makes it from its connection). */
export interface Requester {
  /** Aborts when the request is cancelled or the connection closes. */
  signal: AbortSignal;
  /**
   * The same cancel without an AbortSignal made for it (one costs ~15 µs to make, and lives to the
   * next full collection): what an exec asks before its spawn and waits on for its end.
   */
  readonly cancellation: Cancellation;
  /** The peer process (SO_PEERCRED), or why it is not known; asked only when it matters. */
  peer(): { pid: number; uid?: number } | { unknown: string };
  /** Send a notification on this client's connection (events of a subscription). */
  notify(method: string, params: Record<string, unknown>): void;
  /** Run `fn` when the connection closes; returns a function that unhooks it. */
  onClosed(fn: () => void): () => void;
  /** Which connection it came on: equal for requests of the same connection, opaque otherwise. */
  readonly client: object;
}

/** One request: who asks, a signal that aborts when the request is cancelled, and who reads its text. */
export interface CallContext {
  scope: string;
  signal: AbortSignal;
  /** The same cancel without an AbortSignal made for it (a context that has its signal made anyway may give that). */
  readonly cancellation: Cancellation;
  /** How hints in texts name the next step (schema/voice.ts): the tools' own words, or procctl commands. */
  voice: Voice;
  /** Who asks; absent for calls the daemon makes itself. */
  caller?: Caller;
}
