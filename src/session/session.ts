import { updateModes, type TerminalModes } from './modes.js';
import type { JobInput } from '../runner/launch.js';
import type { Spool } from './spool.js';
import { SessionOutput, type Stream } from './output.js';
import type { EventBus } from './events.js';
import type { DenyReason, EventType, FailReason, SessionStatus, StopReason } from './types.js';

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
  /** For a session restored from the state directory. */
  startedAt?: number;
}

export interface Checkpoint {
  name: string;
  data?: unknown;
  at: number;
}

export interface InterruptField {
  name: string;
  type: 'confirm' | 'text' | 'secret' | 'select';
  label: string;
  required: boolean;
  options?: { value: string; label: string }[];
}

/** A question the session is waiting on (SPEC §7), or the approval it waits for before it starts (§8). */
export interface Interrupt {
  id: string;
  kind: InterruptField['type'] | 'approval';
  reason: string;
  fields: InterruptField[];
  createdAt: number;
  expiresAt: number;
}

/** What became of an interrupt. */
export interface InterruptOutcome {
  id: string;
  kind: Interrupt['kind'];
  reason: string;
  createdAt: number;
  endedAt: number;
  outcome: 'answered' | 'expired' | 'ended';
}

/**
 * What an unstarted session runs once its approval is given (SPEC §8): the exec params as they
 * were checked when it was asked for, with the working directory resolved. Kept in its record,
 * so a pending approval can still be answered after a restart.
 */
export interface PendingExec {
  params: {
    command: string;
    env?: Record<string, string>;
    yieldMs?: number;
    background?: boolean;
    timeout?: number;
    pty?: boolean;
    stdin?: 'pipe' | 'null';
    key?: string;
    ifRunning?: 'replace' | 'reject' | 'keep';
    name?: string;
    /** Run outside the sandbox: what the scope's `elevated: "ask"` asked about. */
    elevated?: boolean;
  };
  cwd: string;
  /** The rule that asked (its position in approvals.rules), for the log; absent when the scope's elevated policy asked. */
  rule?: number;
}

/** How many checkpoints a session keeps (the newest). */
export const MAX_CHECKPOINTS = 20;

export interface StopRequest {
  reason: StopReason;
  signal: NodeJS.Signals;
  at: number;
  note?: string;
  /** True when SIGKILL was needed: the job did not stop within the grace. */
  escalated?: boolean;
}

/**
 * One command run: its identity, lifecycle and captured output. The runner drives it (spawn,
 * output, exit); tools read it. Anyone may wait for its next change.
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

  status: SessionStatus = 'running';
  pid: number | undefined;
  endedAt: number | undefined;
  exitCode: number | null = null;
  signal: string | null = null;
  reason: FailReason | undefined;
  /** A message for a spawn error. */
  error: string | undefined;
  /** Why a denied session never ran, in words (a rule's reason, or what its approval asked). */
  denial: string | undefined;
  /** Set while the session waits for its approval (status `approval_required`): what it will run. */
  pendingExec: PendingExec | undefined;
  /** True once an exec call returned `running` for it: its exit is then announced. */
  backgrounded = false;
  /** Where a stop request is written for the job to see (PROCCTL_STOP_FILE). */
  stopFile: string | undefined;
  /** The session's private scratch directory (PROCCTL_TMPDIR). */
  tmpdir: string | undefined;
  /**
   * The job's own credential for `checkpoint` (`PROCCTL_CHECKPOINT_KEY` in its environment): it
   * reports progress for this session only, in a scope whose token the job is never given.
   * Never persisted or shown.
   */
  checkpointKey: string | undefined;
  /** The thread key it was started with (SPEC §5). */
  key: string | undefined;
  stop: StopRequest | undefined;
  /** A stop (or the clean-up after the leader exited) is in progress. */
  stopping = false;

  /** The question the session is waiting on, if any. */
  interrupt: Interrupt | undefined;
  /** Interrupts that were answered, expired or outlived by the session (the newest 20). */
  readonly pastInterrupts: InterruptOutcome[] = [];
  /** The last time anything was written to the session's input. */
  lastInputAt: number | undefined;
  /** The whole output on disk (SPEC §10), when the daemon has a state directory. */
  spool: Spool | undefined;
  /** Told when something a durable record keeps changes (an interrupt, a checkpoint). */
  onChange: (() => void) | undefined;
  /** What the leader's fd 0 points at (`socket:[…]`, `/dev/pts/N`): the input interrupts watch. */
  stdinId: string | undefined;

  /** The newest checkpoints, oldest first (at most MAX_CHECKPOINTS). */
  readonly checkpoints: Checkpoint[] = [];

  /** Where input goes (a pipe or the terminal), while the job runs. */
  input: JobInput | undefined;
  stdinOpen: boolean;
  /** Runs under a pseudo-terminal. */
  pty = false;
  /** Terminal modes the application set (pty sessions): they decide what some keys send. */
  readonly modes: TerminalModes = { applicationCursor: false, bracketedPaste: false };
  /** Changes the terminal size (pty sessions). */
  resize: ((cols: number, rows: number) => void) | undefined;

  readonly finished: Promise<void>;
  private resolveFinished!: () => void;
  private readonly waiters = new Set<() => void>();
  private readonly events: EventBus;
  private readonly now: () => number;

  constructor(init: SessionInit) {
    this.id = init.id;
    this.scope = init.scope;
    this.command = init.command;
    this.name = init.name;
    this.cwd = init.cwd;
    this.stdinMode = init.stdin;
    this.stdinOpen = init.stdin === 'pipe';
    this.now = init.now ?? Date.now;
    this.startedAt = init.startedAt ?? this.now();
    this.output = new SessionOutput(init.maxOutputChars, init.pendingMaxOutputChars);
    this.events = init.events;
    this.finished = new Promise((resolve) => (this.resolveFinished = resolve));
  }

  /** Started and not ended. A session waiting for its approval has not started: it is not running. */
  get running(): boolean {
    return this.endedAt === undefined && this.status !== 'approval_required';
  }

  /** Created, but waiting for its approval before it starts (SPEC §8). */
  get awaitingApproval(): boolean {
    return this.status === 'approval_required';
  }

  get runtimeMs(): number {
    return (this.endedAt ?? this.now()) - this.startedAt;
  }

  emit(type: EventType, fields: Record<string, unknown> = {}): void {
    if (!this.events.listening) return;
    this.events.emit({ type, sessionId: this.id, scope: this.scope, at: this.now(), ...fields });
  }

  addCheckpoint(name: string, data: unknown): Checkpoint {
    const checkpoint: Checkpoint = { name, at: this.now(), ...(data === undefined ? {} : { data }) };
    this.checkpoints.push(checkpoint);
    if (this.checkpoints.length > MAX_CHECKPOINTS) this.checkpoints.shift();
    this.onChange?.();
    return checkpoint;
  }

  /** Start waiting on a question: pending exec/poll calls return at once. */
  raiseInterrupt(interrupt: Interrupt): void {
    this.interrupt = interrupt;
    this.status = 'waiting_input';
    this.onChange?.();
    this.wake();
  }

  /** Wait for an approval before starting: the session holds `pending` and its interrupt says what is asked. */
  awaitApproval(interrupt: Interrupt, pending: PendingExec): void {
    this.status = 'approval_required';
    this.interrupt = interrupt;
    this.pendingExec = pending;
    this.stdinOpen = false;
  }

  /**
   * End a session that never started: denied by a rule, or its approval refused, expired or
   * withdrawn by kill. Its pending approval, if any, is settled with `outcome`.
   */
  deny(reason: DenyReason, denial: string, outcome?: InterruptOutcome['outcome']): void {
    if (this.endedAt !== undefined) return;
    const i = this.interrupt;
    if (i && outcome) {
      this.pastInterrupts.push({ id: i.id, kind: i.kind, reason: i.reason, createdAt: i.createdAt, endedAt: this.now(), outcome });
      if (this.pastInterrupts.length > 20) this.pastInterrupts.shift();
    }
    this.interrupt = undefined;
    this.pendingExec = undefined;
    this.status = 'denied';
    this.reason = reason;
    this.denial = denial;
    this.endedAt = this.now();
    this.stdinOpen = false;
    this.resolveFinished();
    this.wake();
    this.onChange?.();
  }

  /** End state from a durable record: a finished session, or a running one that was lost. */
  restoreEnd(end: {
    status: SessionStatus;
    endedAt?: number;
    exitCode: number | null;
    signal: string | null;
    reason?: FailReason;
    error?: string;
    denial?: string;
  }): void {
    this.status = end.status;
    this.endedAt = end.endedAt ?? this.now();
    this.exitCode = end.exitCode;
    this.signal = end.signal;
    this.reason = end.reason;
    this.error = end.error;
    this.denial = end.denial;
    this.stdinOpen = false;
    this.resolveFinished();
  }

  /** The pending interrupt is over (answered or expired); the session runs on. */
  settleInterrupt(outcome: InterruptOutcome['outcome']): Interrupt | undefined {
    const i = this.interrupt;
    if (!i) return undefined;
    this.pastInterrupts.push({ id: i.id, kind: i.kind, reason: i.reason, createdAt: i.createdAt, endedAt: this.now(), outcome });
    if (this.pastInterrupts.length > 20) this.pastInterrupts.shift();
    this.interrupt = undefined;
    if (this.running) this.status = 'running';
    this.lastInputAt = this.now();
    this.onChange?.();
    return i;
  }

  get lastCheckpoint(): Checkpoint | undefined {
    return this.checkpoints[this.checkpoints.length - 1];
  }

  /** Capture a chunk from the process; wakes waiters and streams an `output` event. */
  onOutput(stream: Stream, bytes: Buffer | string): void {
    const offset = this.output.totalChars;
    const text = this.output.write(stream, bytes, this.spool);
    if (text.length === 0) return;
    if (this.pty) updateModes(this.modes, text);
    if (this.events.listening) this.emit('output', { stream, data: text, offset });
    this.wake();
  }

  /** Record how the session ended; called once by the runner. */
  finish(outcome: { exitCode: number | null; signal: string | null; error?: string; reason?: FailReason }): void {
    if (!this.running) return;
    for (const stream of ['stdout', 'stderr'] as const) {
      const offset = this.output.totalChars;
      const text = this.output.end(stream, this.spool);
      if (text) this.emit('output', { stream, data: text, offset });
    }
    this.settleInterrupt('ended');
    this.exitCode = outcome.exitCode;
    this.signal = outcome.signal;
    this.error = outcome.error;
    const failure = this.failReason(outcome.reason);
    this.status = failure ? 'failed' : 'completed';
    this.reason = failure;
    this.endedAt = this.now();
    this.stdinOpen = false;
    this.input = undefined;
    this.resize = undefined;
    this.resolveFinished();
    this.wake();
  }

  /** `known`: what the runner knows of the end (a resource limit ended it). */
  private failReason(known?: FailReason): FailReason | undefined {
    if (this.stop) return this.stop.reason;
    if (this.error !== undefined) return 'spawn_error';
    if (known) return known;
    if (this.signal) return 'signal';
    if (this.exitCode === 127) return 'command_not_found';
    if (this.exitCode === 126) return 'not_executable';
    return undefined;
  }

  /** Wake everyone waiting for a change (output, exit, interrupt). */
  wake(): void {
    // Called for every chunk of output: nothing to allocate when nobody waits.
    if (this.waiters.size === 0) return;
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const w of waiters) w();
  }

  /** Resolve on the next change, after `ms`, or when `signal` aborts, whichever comes first. */
  waitForChange(ms: number, signal?: AbortSignal): Promise<void> {
    if (!this.running || signal?.aborted) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
