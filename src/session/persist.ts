import type { EventBus } from './events.js';
import type { Checkpoint, Interrupt, InterruptOutcome, PendingExec, StopRequest } from './session.js';
import { Session } from './session.js';
import type { SpoolCounts } from './spool.js';
import type { FailReason, SessionStatus } from './types.js';

/** A session as written to the state directory (SPEC §10). */
export interface SessionSnapshot {
  v: 1;
  id: string;
  scope: string;
  command: string;
  name: string;
  cwd: string;
  key?: string;
  stdin: 'pipe' | 'null';
  pty: boolean;
  status: SessionStatus;
  startedAt: number;
  endedAt?: number;
  exitCode: number | null;
  signal: string | null;
  reason?: FailReason;
  error?: string;
  /** Why a denied session never ran. */
  denial?: string;
  stop?: StopRequest;
  backgrounded: boolean;
  pid?: number;
  /** The leader's start time (clock ticks since boot), so a reused PID is never mistaken for it. */
  pidStartTime?: number;
  checkpoints: Checkpoint[];
  interrupt?: Interrupt;
  pastInterrupts: InterruptOutcome[];
  /** A pending approval's exec (status `approval_required`): what starts once it is given. */
  pendingExec?: PendingExec;
  output: { retained: string; dropped: number; total: number; pending: string };
  spool?: SpoolCounts;
}

export function snapshot(s: Session, pidStartTime?: number): SessionSnapshot {
  return {
    v: 1,
    id: s.id,
    scope: s.scope,
    command: s.command,
    name: s.name,
    cwd: s.cwd,
    key: s.key,
    stdin: s.stdinMode,
    pty: s.pty,
    status: s.status,
    startedAt: s.startedAt,
    endedAt: s.endedAt,
    exitCode: s.exitCode,
    signal: s.signal,
    reason: s.reason,
    error: s.error,
    denial: s.denial,
    stop: s.stop,
    backgrounded: s.backgrounded,
    pid: s.pid,
    pidStartTime,
    checkpoints: s.checkpoints,
    interrupt: s.interrupt,
    pastInterrupts: s.pastInterrupts,
    pendingExec: s.pendingExec,
    // Only a finished session's output is worth keeping: a running one is recovered as lost.
    output: s.running
      ? { retained: '', dropped: 0, total: 0, pending: '' }
      : { retained: s.output.text(), dropped: s.output.droppedChars, total: s.output.totalChars, pending: s.output.peekPending() },
    spool: s.spool?.counts(),
  };
}

/** Is this parsed JSON a snapshot we can restore? (A torn or foreign file is not.) */
export function isSnapshot(x: unknown): x is SessionSnapshot {
  const s = x as SessionSnapshot;
  const str = (v: unknown) => typeof v === 'string';
  const num = (v: unknown) => typeof v === 'number' && Number.isFinite(v);
  const numOrNull = (v: unknown) => v === null || num(v);
  return (
    typeof s === 'object' &&
    s !== null &&
    !Array.isArray(s) &&
    s.v === 1 &&
    str(s.id) &&
    /^[a-z0-9]{1,32}$/.test(s.id) &&
    str(s.scope) &&
    str(s.command) &&
    str(s.name) &&
    str(s.cwd) &&
    (s.stdin === 'pipe' || s.stdin === 'null') &&
    num(s.startedAt) &&
    (s.endedAt === undefined || num(s.endedAt)) &&
    str(s.status) &&
    numOrNull(s.exitCode) &&
    (s.signal === null || str(s.signal)) &&
    Array.isArray(s.checkpoints) &&
    Array.isArray(s.pastInterrupts) &&
    typeof s.output === 'object' &&
    s.output !== null &&
    str(s.output.retained) &&
    str(s.output.pending) &&
    num(s.output.dropped) &&
    num(s.output.total)
  );
}

/** Is this the record of a session still waiting for its approval, complete enough to be answered? */
export function isPendingApproval(snap: SessionSnapshot): boolean {
  const p = snap.pendingExec;
  return (
    snap.status === 'approval_required' &&
    snap.endedAt === undefined &&
    typeof snap.interrupt === 'object' &&
    snap.interrupt !== null &&
    typeof snap.interrupt.expiresAt === 'number' &&
    typeof p === 'object' &&
    p !== null &&
    typeof p.cwd === 'string' &&
    typeof p.params === 'object' &&
    p.params !== null &&
    typeof p.params.command === 'string'
  );
}

/**
 * A session back from its snapshot, answering list, poll and log as before: a finished one, or
 * one still waiting for its approval (see isPendingApproval), which can then be answered.
 */
export function restoreSession(snap: SessionSnapshot, events: EventBus, caps: { maxOutputChars: number; pendingMaxOutputChars: number }): Session {
  const s = new Session({
    id: snap.id,
    scope: snap.scope,
    command: snap.command,
    name: snap.name,
    cwd: snap.cwd,
    stdin: snap.stdin,
    maxOutputChars: Math.max(caps.maxOutputChars, snap.output.retained.length),
    pendingMaxOutputChars: Math.max(caps.pendingMaxOutputChars, snap.output.pending.length),
    events,
    startedAt: snap.startedAt,
  });
  s.key = snap.key;
  s.pty = snap.pty;
  s.pid = snap.pid;
  s.backgrounded = snap.backgrounded;
  s.stop = snap.stop;
  s.checkpoints.push(...(snap.checkpoints ?? []));
  s.pastInterrupts.push(...(snap.pastInterrupts ?? []));
  s.output.restore(snap.output);
  if (isPendingApproval(snap)) s.awaitApproval(snap.interrupt!, snap.pendingExec!);
  else s.restoreEnd(snap);
  return s;
}
