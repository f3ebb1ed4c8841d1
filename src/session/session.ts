import type { Cancellation } from '../base/cancellation.js';
import { yieldAfterAnswers } from '../base/yield-cpu.js';
import { sessionEdited } from './edits.js';
import { updateModes, type TerminalModes } from './modes.js';
import type { JobInput } from './input.js';
import type { Spool } from './spool.js';
import { SessionOutput, type Stream } from './output.js';
import { Scrubber } from '../base/scrub.js';
import { pieceText } from './chunks.js';
import type { EventBus } from './events.js';
import type { Checkpoint, Interrupt, InterruptOutcome, ListenPort, PendingExec, Resources, StopRequest } from './record.js';
import type { DenyReason, EventType, FailReason, Notify } from './types.js';

export type { Checkpoint, Interrupt, InterruptField, InterruptOutcome, ListenPort, PendingExec, Resources, StopRequest } from './record.js';

/**
 * Where a session is in its life, with the data that state has and no other: a session waiting
 * for its approval has what it will run and no process; a running one has its leader's pid; an
 * ended one has its exit; a denied one, why it never ran.
 */
export type SessionState =
  | { status: 'approval_required'; interrupt: Interrupt; exec: PendingExec }
  | { status: 'running'; pid: number | undefined }
  | { status: 'waiting_input'; pid: number | undefined; interrupt: Interrupt }
  | { status: 'completed'; pid: number | undefined; endedAt: number; exitCode: number | null; signal: string | null }
  | { status: 'failed'; pid: number | undefined; endedAt: number; exitCode: number | null; signal: string | null; reason: FailReason; error?: string }
  | { status: 'denied'; endedAt: number; reason: DenyReason; denial: string };

/** What a session restored from its record brings besides its state. */
export interface RestoredParts {
  state: SessionState;
  pty: boolean;
  backgrounded: boolean;
  stop: StopRequest | undefined;
  checkpoints: Checkpoint[];
  networkDenied?: { host: string; count: number; reason: string }[];
  resources?: Resources;
  /** The TCP ports it was last seen listening on. */
  ports?: ListenPort[];
  /** An ended session's held changes were waiting for a person's answer (SPEC §16). */
  changesApproval?: Interrupt;
  /** A running session a restart handed over (SPEC §19): what its record does not keep. */
  carried?: { readyAt?: number; inputAt?: number; paused: { since?: number; before: number } };
}

/** How the approval rules judged its command (SPEC §8): the deciding part, and the rule that decided it. */
export interface SessionDecision {
  action: string;
  part: string;
  /** The rule's position in approvals.rules; absent for the default. */
  rule?: number;
  reason: string;
}

export interface SessionInit {
  id: string;
  scope: string;
  command: string;
  name: string;
  cwd: string;
  stdin: 'pipe' | 'null';
  maxOutputChars: number;
  pendingMaxOutputChars: number;
  events: EventBus;
  now?: () => number;
  /** The thread key it was started with (SPEC §5). */
  key?: string;
  /** Its private scratch directory (PROCCTL_TMPDIR) and stop file (PROCCTL_STOP_FILE), when it runs. */
  scratch?: { dir: string; stopFile: string };
  /** The job's credential for `checkpoint` (PROCCTL_CHECKPOINT_KEY). */
  checkpointKey?: string;
  /** The persistent shell it is a command of (SPEC §20). */
  shell?: string;
  /** The whole output on disk (SPEC §10). */
  spool?: Spool;
  /** Interrupts settled before this session started (its approval). */
  pastInterrupts?: InterruptOutcome[];
  /** What its `waitFor` waits for, in words (`port 3000 answers`): it is ready once that holds. */
  waitFor?: string;
  /** Which of its ends, once backgrounded, are notifications (SPEC §5). */
  notify?: Notify;
  /** How the rules judged it, when they did (kept in its durable record). */
  decision?: SessionDecision;
  /** For a session restored from the state directory. */
  startedAt?: number;
  restored?: RestoredParts;
}

/** What the runner hands a session once its process exists. */
export interface Attached {
  pid: number | undefined;
  input: JobInput | undefined;
  /** What the leader's fd 0 points at (`socket:[…]`, `/dev/pts/N`). */
  stdinId: string | undefined;
  /** Runs under a pseudo-terminal. */
  pty: boolean;
  resize: ((cols: number, rows: number) => void) | undefined;
  /** Handed over by the last image (SPEC §19): what it did at the start (a terminal's ^D for stdin "null") is done already. */
  carried?: boolean;
}

/** A review session's changes (SPEC §16): held while it runs, then pending until applied or discarded. */
export interface ChangesSummary {
  state: 'running' | 'pending' | 'applied' | 'discarded' | 'undone' | 'none';
  pending: boolean;
  files: number;
  bytes: number;
  /** Why its changes could not be read; they can still be discarded. */
  error?: string;
}

/** How many checkpoints a session keeps (the newest). */
export const MAX_CHECKPOINTS = 20;
/** How many refused destinations a session keeps counts for. */
const MAX_DENIED_HOSTS = 100;
/** How many settled interrupts a session keeps (the newest). */
const MAX_PAST_INTERRUPTS = 20;

/**
 * One command run: its identity, lifecycle and captured output. It changes only through its own
 * methods: the runner attaches its process and reports its output and end, the stop path
 * records a stop, tools answer its questions; everyone else reads it. Anyone may wait for its
 * next change.
 */
export class Session {
  readonly id: string;
  readonly scope: string;
  readonly command: string;
  readonly name: string;
  readonly cwd: string;
  readonly stdinMode: 'pipe' | 'null';
  readonly startedAt: number;
  readonly output: SessionOutput;
  /** The thread key it was started with (SPEC §5). */
  readonly key: string | undefined;
  /** The session's private scratch directory (PROCCTL_TMPDIR). */
  readonly tmpdir: string | undefined;
  /** Where a stop request is written for the job to see (PROCCTL_STOP_FILE). */
  readonly stopFile: string | undefined;
  /**
   * The job's own credential for `checkpoint` (`PROCCTL_CHECKPOINT_KEY` in its environment): it
   * reports progress for this session only, in a scope whose token the job is never given.
   * Never persisted or shown.
   */
  readonly checkpointKey: string | undefined;
  /** The persistent shell it ran in, when it is a shell's command (SPEC §20). */
  readonly shell: string | undefined;
  /** The whole output on disk (SPEC §10), when the daemon has a state directory. */
  readonly spool: Spool | undefined;
  /** Interrupts that were answered, expired or outlived by the session (the newest 20). */
  readonly pastInterrupts: readonly InterruptOutcome[];
  /** The newest checkpoints, oldest first (at most MAX_CHECKPOINTS). */
  readonly checkpoints: readonly Checkpoint[];
  /** Terminal modes the application set (pty sessions): they decide what some keys send. */
  readonly modes: TerminalModes = { applicationCursor: false, bracketedPaste: false };
  readonly finished: Promise<void>;
  /** Which of its ends, once backgrounded, are notifications. */
  readonly notify: Notify;

  private state: SessionState;
  private io: Attached | undefined;
  private inputOpen: boolean;
  private onPty = false;
  private stopRequest: StopRequest | undefined;
  private stopStarted = false;
  private announced = false;
  private inputAt: number | undefined;
  private recorder: (() => void) | undefined;
  /**
   * Told when a new quiet period starts that output does not start: input sent, an interrupt
   * answered, the session continued after a pause. The interrupt watcher plans its next visit
   * from it (interrupt/watcher.ts) rather than wait for its sweep to come round.
   */
  quietRestarted: (() => void) | undefined;
  /** Paused (its cgroup frozen) since then; only while it runs. */
  private pausedSince: number | undefined;
  /** Time spent paused before the current pause. */
  private pausedBefore = 0;
  private continuedAt: number | undefined;
  /** What it used, read from its cgroup when it ended. */
  private used: Resources | undefined;
  /** The read of `used` its end left for later (finish): made when first asked for. */
  private usedLater: (() => Resources | undefined) | undefined;
  /** The TCP ports it listens on, as last looked at (runner/ports.ts); once it ended, the last seen. */
  private listening: readonly ListenPort[] = [];
  private readonly past: InterruptOutcome[];
  private readonly kept: Checkpoint[];
  private resolveFinished!: () => void;
  private readonly waiters = new Set<() => void>();
  /** Waiters for a change other than output (its end, a question, readiness): a chunk of output does not wake them. */
  private readonly stateWaiters = new Set<() => void>();
  private readonly outputWatchers = new Set<(stream: Stream, text: string) => void>();
  private readonly denied = new Map<string, { count: number; reason: string }>();
  private readonly ready: { waitingFor: string; readyAt: number | undefined } | undefined;
  private quietPolls = 0;
  /** Bumped by every change a view of it shows (output aside: its count says that), so a view can be kept until then. */
  private rev = 0;
  private readonly events: EventBus;
  private readonly now: () => number;
  /** How the rules judged its command, when they did (SPEC §8). */
  readonly decision: SessionDecision | undefined;

  constructor(init: SessionInit) {
    this.id = init.id;
    this.scope = init.scope;
    this.command = init.command;
    this.name = init.name;
    this.cwd = init.cwd;
    this.key = init.key;
    this.stdinMode = init.stdin;
    this.tmpdir = init.scratch?.dir;
    this.stopFile = init.scratch?.stopFile;
    this.checkpointKey = init.checkpointKey;
    this.shell = init.shell;
    this.spool = init.spool;
    this.now = init.now ?? Date.now;
    this.startedAt = init.startedAt ?? this.now();
    this.output = new SessionOutput(init.maxOutputChars, init.pendingMaxOutputChars);
    this.events = init.events;
    this.past = this.pastInterrupts = [...(init.pastInterrupts ?? [])];
    this.finished = new Promise((resolve) => (this.resolveFinished = resolve));
    this.notify = init.notify ?? 'exit';
    this.decision = init.decision;
    this.ready = init.waitFor === undefined ? undefined : { waitingFor: init.waitFor, readyAt: undefined };
    const r = init.restored;
    this.kept = this.checkpoints = [...(r?.checkpoints ?? [])];
    this.state = r?.state ?? { status: 'running', pid: undefined };
    this.inputOpen = init.stdin === 'pipe' && this.running;
    for (const d of r?.networkDenied ?? []) this.denied.set(d.host, { count: d.count, reason: d.reason });
    if (r) {
      this.onPty = r.pty;
      this.announced = r.backgrounded;
      this.stopRequest = r.stop;
      this.used = r.resources;
      this.listening = r.ports ?? [];
      if (this.endedAt !== undefined) this.resolveFinished();
      if (this.endedAt !== undefined) this.changesQuestion = r.changesApproval;
      if (r.carried) {
        if (this.ready && r.carried.readyAt !== undefined) this.ready.readyAt = r.carried.readyAt;
        this.inputAt = r.carried.inputAt;
        this.pausedSince = r.carried.paused.since;
        this.pausedBefore = r.carried.paused.before;
      }
    }
  }

  // What it is now: read by everyone, changed only below.

  get status(): SessionState['status'] {
    return this.state.status;
  }

  /** The state with its data (narrow on `status`). */
  get current(): Readonly<SessionState> {
    return this.state;
  }

  /** The leader's pid (the process group's id), once it was started. */
  get pid(): number | undefined {
    return 'pid' in this.state ? this.state.pid : undefined;
  }

  get endedAt(): number | undefined {
    return 'endedAt' in this.state ? this.state.endedAt : undefined;
  }

  get exitCode(): number | null {
    return 'exitCode' in this.state ? this.state.exitCode : null;
  }

  get signal(): string | null {
    return 'signal' in this.state ? this.state.signal : null;
  }

  get reason(): FailReason | undefined {
    return 'reason' in this.state ? this.state.reason : undefined;
  }

  /** A message for a spawn error. */
  get error(): string | undefined {
    return this.state.status === 'failed' ? this.state.error : undefined;
  }

  /** Why a denied session never ran, in words (a rule's reason, or what its approval asked). */
  get denial(): string | undefined {
    return this.state.status === 'denied' ? this.state.denial : undefined;
  }

  /** The question the session is waiting on (or the approval it, or once it ended its held changes, waits for), if any. */
  get interrupt(): Interrupt | undefined {
    return 'interrupt' in this.state ? this.state.interrupt : this.changesQuestion;
  }

  /** While it waits for its approval: what it will run. */
  get pendingExec(): PendingExec | undefined {
    return this.state.status === 'approval_required' ? this.state.exec : undefined;
  }

  /** True once an exec call returned `running` for it: its exit is then announced. */
  get backgrounded(): boolean {
    return this.announced;
  }

  get stop(): StopRequest | undefined {
    return this.stopRequest;
  }

  /** A stop (or the clean-up after the leader exited) is in progress. */
  get stopping(): boolean {
    return this.stopStarted;
  }

  /** The last time anything was written to the session's input. */
  get lastInputAt(): number | undefined {
    return this.inputAt;
  }

  /** Where input goes (a pipe or the terminal), while the job runs. */
  get input(): JobInput | undefined {
    return this.io?.input;
  }

  get stdinOpen(): boolean {
    return this.inputOpen;
  }

  get stdinId(): string | undefined {
    return this.io?.stdinId;
  }

  /** Runs under a pseudo-terminal. */
  get pty(): boolean {
    return this.onPty;
  }

  /** Changes the terminal size (pty sessions). */
  get resize(): ((cols: number, rows: number) => void) | undefined {
    return this.io?.resize;
  }

  /**
   * Frozen by `process pause` (SPEC §15). A flag on a running session rather than a status of its
   * own: a paused session is still running in every sense a client relies on (it can be killed,
   * polled, written to, and its interrupt stays), and every status check keeps its meaning.
   */
  get paused(): boolean {
    return this.pausedSince !== undefined && this.running;
  }

  /** How long it has been paused in all, up to `now` (its timeout does not count that time). */
  pausedMs(now = this.now()): number {
    return this.pausedBefore + (this.pausedSince === undefined ? 0 : now - this.pausedSince);
  }

  /** Its pause as a restart hands it on: since when (if paused now) and how long before. */
  pausedState(): { since?: number; before: number } {
    return { ...(this.pausedSince === undefined ? {} : { since: this.pausedSince }), before: this.pausedBefore };
  }

  /** Wake everyone waiting on it now (a restart is about to answer them, SPEC §19). */
  wakeWaiters(): void {
    this.wake();
  }

  /** When it was last continued after a pause: its quiet period starts again then. */
  get lastContinuedAt(): number | undefined {
    return this.continuedAt;
  }

  /** What it used (SPEC §15), once it ended in a cgroup. */
  get resources(): Resources | undefined {
    if (this.usedLater !== undefined) {
      const read = this.usedLater;
      this.usedLater = undefined;
      this.used = read();
    }
    return this.used;
  }

  /** The TCP ports it listens on (SPEC §20), sorted by port: as last looked at while it runs, the last seen once it ended. */
  get ports(): readonly ListenPort[] {
    return this.listening;
  }

  /** Started and not ended. A session waiting for its approval has not started: it is not running. */
  /** What its `waitFor` waits for, and when that held (undefined: not yet). */
  get readiness(): { readonly waitingFor: string; readonly readyAt: number | undefined } | undefined {
    return this.ready;
  }

  get running(): boolean {
    return this.state.status === 'running' || this.state.status === 'waiting_input';
  }

  /** Created, but waiting for its approval before it starts (SPEC §8). */
  get awaitingApproval(): boolean {
    return this.state.status === 'approval_required';
  }

  get runtimeMs(): number {
    return this.runtimeMsAt(this.now());
  }

  /** Its running time when its clock reads `now` (clock()): a page of sessions reads the clock once, not once a session. */
  runtimeMsAt(now: number): number {
    return (this.endedAt ?? now) - this.startedAt;
  }

  /** Its clock's time now (the daemon's clock, which every session of a daemon shares). */
  clock(): number {
    return this.now();
  }

  /** Changes whenever what `list` shows of it changes, its output and running time aside (those have counts of their own). */
  get revision(): number {
    return this.rev;
  }

  get lastCheckpoint(): Checkpoint | undefined {
    return this.kept[this.kept.length - 1];
  }

  emit(type: EventType, fields: Record<string, unknown> = {}): void {
    if (!this.events.listening) return;
    this.events.emit({ type, sessionId: this.id, scope: this.scope, at: this.now(), ...fields });
  }

  // How it changes.

  /** Told at once when it stops running (its end, or a wait for an approval): the registry's counts follow it. */
  onStop: ((session: Session) => void) | undefined;

  /** Who keeps its durable record: told whenever something the record holds changes (undefined: no one, it was forgotten). */
  recordWith(save: (() => void) | undefined): void {
    this.recorder = save;
  }

  private changed(): void {
    this.revise();
    this.recorder?.();
  }

  /** What list shows of it changed: its revision moves, and the count of every session's (session/edits.ts). */
  private revise(): void {
    this.rev++;
    sessionEdited();
  }

  /** Its process exists: where its input goes and how its terminal is resized. */
  attach(io: Attached): void {
    if (this.state.status !== 'running') return;
    this.io = io;
    this.onPty = io.pty;
    this.state = { status: 'running', pid: io.pid };
    this.revise();
    // A terminal always has input; stdin "null" there means the job reads end-of-input at once.
    if (io.pty && this.stdinMode === 'null' && !io.carried) io.input?.end();
    this.inputOpen = this.stdinMode === 'pipe' && io.input !== undefined;
  }

  /** The job closed its input (or writing to it failed): nothing more can be written. */
  inputClosed(): void {
    this.inputOpen = false;
  }

  /** Send end of input: a pipe is closed for good; a terminal gets ^D and stays open (the job may read again). */
  closeInput(): void {
    this.io?.input?.end();
    if (!this.onPty) this.inputOpen = false;
  }

  /** Input was written by hand: it answers a pending question as well as resume would, and restarts the quiet period. */
  inputSent(): void {
    if (this.interrupt) this.settleInterrupt('answered');
    this.inputAt = this.now();
    this.quietRestarted?.();
  }

  /** An exec call answered `running` for it: its exit will be announced, and its record kept now. */
  markBackgrounded(): void {
    this.announced = true;
    this.changed();
  }

  /**
   * Record a stop request (the first one wins) and start the stop: true for the caller that
   * starts it, false when a stop or the clean-up after the leader is already under way.
   */
  requestStop(stop: StopRequest): boolean {
    if (!this.running) return false;
    this.stopRequest ??= stop;
    this.revise();
    return this.beginCleanup();
  }

  /** Start terminating what is left of the job: false when that is already under way. */
  beginCleanup(): boolean {
    if (this.stopStarted) return false;
    this.stopStarted = true;
    return true;
  }

  /** Whether the stop needed SIGKILL: the job did not stop within the grace. */
  stopEscalated(escalated: boolean): void {
    if (this.stopRequest) this.stopRequest.escalated = escalated;
    this.revise();
  }

  /** Its processes are frozen (the runner froze its cgroup). */
  pause(): void {
    if (!this.running || this.pausedSince !== undefined) return;
    this.pausedSince = this.now();
    this.emit('paused');
    this.changed();
    this.wake();
  }

  /** Its processes run again. */
  unpause(): void {
    if (this.pausedSince === undefined) return;
    const now = this.now();
    this.pausedBefore += now - this.pausedSince;
    this.pausedSince = undefined;
    this.continuedAt = now;
    if (!this.running) return;
    this.emit('continued');
    this.changed();
    this.wake();
    this.quietRestarted?.();
  }

  addCheckpoint(name: string, data: unknown): Checkpoint {
    const checkpoint: Checkpoint = { name, at: this.now(), ...(data === undefined ? {} : { data }) };
    this.kept.push(checkpoint);
    if (this.kept.length > MAX_CHECKPOINTS) this.kept.shift();
    this.changed();
    return checkpoint;
  }

  /** Start waiting on a question: pending exec/poll calls return at once. */
  raiseInterrupt(interrupt: Interrupt): void {
    if (!this.running) return;
    this.state = { status: 'waiting_input', pid: this.pid, interrupt };
    this.changed();
    this.wake();
  }

  /** The pending interrupt is over (answered or expired); the session runs on. */
  settleInterrupt(outcome: InterruptOutcome['outcome']): Interrupt | undefined {
    const i = this.interrupt;
    if (!i || this.state.status !== 'waiting_input') return undefined;
    this.remember(i, outcome);
    this.state = { status: 'running', pid: this.state.pid };
    this.inputAt = this.now();
    this.changed();
    this.wake();
    this.quietRestarted?.();
    return i;
  }

  /** Wait for an approval before starting: the session holds what it will run and its interrupt says what is asked. */
  awaitApproval(interrupt: Interrupt, exec: PendingExec): void {
    if (this.state.status !== 'running' || this.io) return;
    this.state = { status: 'approval_required', interrupt, exec };
    this.inputOpen = false;
    this.revise();
    this.onStop?.(this);
  }

  /**
   * End a session that never started: denied by a rule, or its approval refused, expired or
   * withdrawn by kill. Its pending approval, if any, is settled with `outcome`.
   */
  deny(reason: DenyReason, denial: string, outcome?: InterruptOutcome['outcome']): void {
    if (this.endedAt !== undefined || this.io) return;
    const i = this.interrupt;
    if (i && outcome) this.remember(i, outcome);
    this.state = { status: 'denied', endedAt: this.now(), reason, denial };
    this.ended();
    this.changed();
  }

  /** Values never kept in its output (SPEC §21: a credential's value, said instead as its name); set before its job starts. */
  private scrubbers: { stdout: Scrubber; stderr: Scrubber } | undefined;

  scrubOutput(replacements: readonly { find: string; put: string }[]): void {
    if (replacements.length > 0) this.scrubbers = { stdout: new Scrubber(replacements), stderr: new Scrubber(replacements) };
  }

  /**
   * Where its job's output pipes may be spliced straight into the spool (runner/launch/splice.ts):
   * not when output is scrubbed (the spool must not hold a credential's value).
   */
  get spliceSpool(): Spool | undefined {
    return this.scrubbers ? undefined : this.spool;
  }

  /**
   * Capture a chunk from the process; wakes waiters and streams an `output` event. `spooled`: the
   * reader has put this chunk's whole characters in the spool already (spliced), so the capture
   * does not write them; a character it ends inside is not there, and the capture writes it once
   * whole (runner/launch/splice.ts reads the pipes meanwhile), or U+FFFD at the stream's end.
   */
  onOutput(stream: Stream, bytes: Buffer | string, spooled = false): void {
    if (this.scrubbers) bytes = this.scrubbers[stream].write(typeof bytes === 'string' ? Buffer.from(bytes) : bytes);
    const offset = this.output.totalChars;
    const piece = this.output.capture(stream, bytes, spooled ? undefined : this.spool);
    if (piece.length === 0) return;
    // Decoded here only for whoever reads it as it comes; else when the output is read.
    if (this.onPty || this.events.listeningForOutput || this.outputWatchers.size > 0) this.told(stream, pieceText(piece), offset);
    this.wake(true);
  }

  private told(stream: Stream, text: string, offset: number): void {
    if (this.onPty) updateModes(this.modes, text);
    if (this.events.listening) this.emit('output', { stream, data: text, offset });
    for (const watch of this.outputWatchers) watch(stream, text);
  }

  /** Be told of its output as it is captured (text as the output keeps it), until the returned function is called. */
  watchOutput(fn: (stream: Stream, text: string) => void): () => void {
    this.outputWatchers.add(fn);
    return () => this.outputWatchers.delete(fn);
  }

  private held: ChangesSummary | undefined;
  /** Ended, its held changes wait for a person's answer (SPEC §16): the interrupt that asks. */
  private changesQuestion: Interrupt | undefined;

  /** Its job ended and a rule said review: its held changes wait for a person's answer. */
  awaitChangesApproval(interrupt: Interrupt): void {
    if (this.endedAt === undefined || this.status === 'denied' || this.changesQuestion) return;
    this.changesQuestion = interrupt;
    this.changed();
  }

  /** The changes approval is over: answered (apply or discard), expired (the changes stay pending), or nothing is left to approve. */
  settleChangesApproval(outcome: InterruptOutcome['outcome']): Interrupt | undefined {
    const i = this.changesQuestion;
    if (!i) return undefined;
    this.remember(i, outcome);
    this.changesQuestion = undefined;
    this.changed();
    // Whoever shows the question (a console, an MCP client) hears that it is over, and how.
    if (this.held) this.emit('changes', { ...this.held, approval: outcome });
    return i;
  }

  /** Review mode (SPEC §16): what its changes are and what became of them, as list and poll show it. */
  get changes(): ChangesSummary | undefined {
    return this.held;
  }

  /**
   * Ended, and its review's changes not settled yet (what the job wrote is read off the daemon's
   * thread as it ends, approval/changes.ts): pending, or none, in a moment. Until then its end is
   * not over for a wait, and it is not forgotten.
   */
  get settling(): boolean {
    return !this.running && this.held?.state === 'running';
  }

  /** The keeper of held changes (changes/held.ts) says where they stand: at the start, the end, and each apply, discard or undo. */
  noteChanges(summary: ChangesSummary | undefined): void {
    const before = this.held;
    this.held = summary;
    this.revise();
    // Subscribers hear where the changes went (pending at the end, applied, discarded, undone).
    const moved = summary && (!before || before.state !== summary.state || before.files !== summary.files || before.bytes !== summary.bytes || before.error !== summary.error);
    if (moved) this.emit('changes', { ...summary });
    // An ended review settled: a wait for its end is over now.
    if (before?.state === 'running' && !this.running && !this.settling) this.wake();
  }

  /** Destinations its network proxy refused, by host: how often and why (SPEC §12). */
  get networkDenied(): { host: string; count: number; reason: string }[] {
    return [...this.denied.entries()].map(([host, d]) => ({ host, count: d.count, reason: d.reason }));
  }

  /**
   * Its proxy refused a destination: counted by host, and an event says so. A new host changes
   * the record at once; a count going up waits for the record's next write (at the latest its
   * final one), so a job retrying a refused host cannot make the daemon write a file per retry.
   * True for the first refusal of a host.
   */
  noteDenied(host: string, reason: string): boolean {
    const d = this.denied.get(host);
    this.emit('network_denied', { host, reason });
    this.revise();
    if (d) {
      d.count++;
      return false;
    }
    if (this.denied.size >= MAX_DENIED_HOSTS) return false;
    this.denied.set(host, { count: 1, reason });
    this.changed();
    return true;
  }

  /** The ports it listens on were looked at (runner/ports.ts): a change is a change of what list shows and of its record. */
  notePorts(ports: readonly ListenPort[]): void {
    if (!this.running) return;
    const before = this.listening;
    if (before.length === ports.length && before.every((p, i) => p.port === ports[i].port && p.address === ports[i].address)) return;
    this.listening = ports;
    this.changed();
  }

  /** What its `waitFor` waits for holds: it is ready (once, while it runs). */
  markReady(detail: Record<string, unknown> = {}): void {
    const r = this.ready;
    if (!r || r.readyAt !== undefined || !this.running) return;
    r.readyAt = this.now();
    // The list shows whether it is ready.
    this.changed();
    this.emit('ready', { waitFor: r.waitingFor, afterMs: r.readyAt - this.startedAt, ...detail });
    this.wake();
  }

  /** Take the output no poll has returned yet; a finished session's record keeps what is undrained, so it changed. */
  drain(): ReturnType<SessionOutput['drain']> {
    const drained = this.output.drain();
    if (!this.running && drained.text) this.changed();
    return drained;
  }

  /**
   * Record how the session ended; called once by the runner. `reason`: what the runner knows (a
   * resource limit ended it). `resources` may be a read to make when they are first asked for
   * (the runner asks once the turn is over, before the cgroup they are read from goes).
   */
  finish(outcome: { exitCode: number | null; signal: string | null; error?: string; reason?: FailReason; resources?: Resources | (() => Resources | undefined) }): void {
    if (!this.running) return;
    if (typeof outcome.resources === 'function') this.usedLater = outcome.resources;
    else this.used = outcome.resources;
    if (this.pausedSince !== undefined) {
      this.pausedBefore += this.now() - this.pausedSince;
      this.pausedSince = undefined;
    }
    for (const stream of ['stdout', 'stderr'] as const) {
      const held = this.scrubbers?.[stream].end();
      if (held && held.length > 0) this.output.capture(stream, held, this.spool);
      const offset = this.output.totalChars;
      // A character cut at the end is in no spool yet, spliced or read: it goes there as U+FFFD, as into the transcript.
      const text = this.output.end(stream, this.spool);
      if (text) this.emit('output', { stream, data: text, offset });
      if (text) for (const watch of this.outputWatchers) watch(stream, text);
    }
    if (this.interrupt) this.remember(this.interrupt, 'ended');
    const end = { pid: this.pid, endedAt: this.now(), exitCode: outcome.exitCode, signal: outcome.signal };
    const failure = this.failReason(outcome);
    this.state = failure ? { status: 'failed', ...end, reason: failure, ...(outcome.error === undefined ? {} : { error: outcome.error }) } : { status: 'completed', ...end };
    this.io = undefined;
    // Its record, trail entry and cleanup follow the answers this end makes (an exec's): their readers first.
    yieldAfterAnswers();
    this.ended();
  }

  private failReason(o: { exitCode: number | null; signal: string | null; error?: string; reason?: FailReason }): FailReason | undefined {
    if (this.stopRequest) return this.stopRequest.reason;
    if (o.error !== undefined) return 'spawn_error';
    if (o.reason) return o.reason;
    if (o.signal) return 'signal';
    if (o.exitCode === 127) return 'command_not_found';
    if (o.exitCode === 126) return 'not_executable';
    return undefined;
  }

  private remember(i: Interrupt, outcome: InterruptOutcome['outcome']): void {
    this.past.push({ id: i.id, kind: i.kind, reason: i.reason, createdAt: i.createdAt, endedAt: this.now(), outcome });
    if (this.past.length > MAX_PAST_INTERRUPTS) this.past.shift();
  }

  private ended(): void {
    this.onStop?.(this);
    this.revise();
    this.inputOpen = false;
    this.resolveFinished();
    this.wake();
  }

  /** Wake everyone waiting for a change (output, exit, interrupt); for output, only those who wait for output too. */
  private wake(output = false): void {
    // Called for every chunk of output: nothing to allocate when nobody waits.
    if (this.waiters.size > 0) {
      const waiters = [...this.waiters];
      this.waiters.clear();
      for (const w of waiters) w();
    }
    if (!output && this.stateWaiters.size > 0) {
      const waiters = [...this.stateWaiters];
      this.stateWaiters.clear();
      for (const w of waiters) w();
    }
  }

  /**
   * Resolve on the next change of state (exit, interrupt, a restart) or when `signal` aborts, with
   * no timer of its own: for a caller that waits on many sessions under one deadline (process
   * wait). Output is not such a change: four sessions printing fast would wake the wait, and make
   * its signals again, on every chunk they print.
   */
  nextChange(signal: AbortSignal): Promise<void> {
    // Ended, unless its review's changes are still being settled (the next change is then theirs).
    if ((!this.running && !this.settling) || signal.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.stateWaiters.delete(done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      this.stateWaiters.add(done);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Polls in a row that found no new output while it ran: how long the next poll should wait (poll's retryInMs). */
  notePoll(newOutput: boolean): number {
    this.quietPolls = newOutput ? 0 : this.quietPolls + 1;
    return this.quietPolls;
  }

  /**
   * Resolve on the next change, after `ms`, or when `signal` aborts, whichever comes first.
   * `output: false`: output is not a change to this waiter (one waiting for the end is not woken per chunk).
   */
  waitForChange(ms: number, signal?: Cancellation, output = true): Promise<void> {
    if (!this.running || signal?.aborted) return Promise.resolve();
    const set = output ? this.waiters : this.stateWaiters;
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
