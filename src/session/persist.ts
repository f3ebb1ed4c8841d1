import type { EventBus } from './events.js';
import type { SessionRecord } from './record.js';
import { Session, type RestoredParts, type SessionInit, type SessionState } from './session.js';
import type { Spool } from './spool.js';

export { parseRecord, type SessionRecord } from './record.js';

/** A session as its record says it (SPEC §10); the schema is session/record.ts. */
export function toRecord(s: Session, pidStartTime?: number): SessionRecord {
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
    decision: s.decision,
    stop: s.stop,
    backgrounded: s.backgrounded,
    pid: s.pid,
    pidStartTime,
    checkpoints: [...s.checkpoints],
    ...(s.networkDenied.length > 0 ? { networkDenied: s.networkDenied } : {}),
    interrupt: s.interrupt,
    pastInterrupts: [...s.pastInterrupts],
    pendingExec: s.pendingExec,
    // Only a finished session's output is worth keeping: a running one is recovered as lost.
    output: s.running
      ? { retained: '', dropped: 0, total: 0, pending: '' }
      : { retained: s.output.text(), dropped: s.output.droppedChars, total: s.output.totalChars, pending: s.output.peekPending() },
    spool: s.spool?.counts(),
    resources: s.resources,
    ...(s.ports.length > 0 ? { ports: [...s.ports] } : {}),
    ...(adoptedAfterCrash.has(s) ? { adopted: 'crash' as const } : {}),
    ...(exitUnknown.has(s) ? { exitUnknown: exitUnknown.get(s) } : {}),
  };
}

/** Sessions a daemon took over after a crash of the one that started them (their records say `adopted: "crash"`). */
const adoptedAfterCrash = new WeakSet<Session>();
/** Why a session adopted after a crash ended with neither exit code nor signal (its record's `exitUnknown`). */
const exitUnknown = new WeakMap<Session, string>();

/** The session's job ended and how could not be told (runner/native.ts): said in its record. */
export function noteExitUnknown(s: Session, why: string): void {
  exitUnknown.set(s, why);
}

/** Is this the record of a session still waiting for its approval, complete enough to be answered? */
export function isPendingApproval(r: SessionRecord): boolean {
  return r.status === 'approval_required' && r.endedAt === undefined && r.interrupt !== undefined && r.pendingExec !== undefined;
}

/** Is this the record of a session that ended (as opposed to one that was running when the daemon stopped)? */
export function isEnded(r: SessionRecord): boolean {
  return r.endedAt !== undefined && (r.status === 'completed' || r.status === 'failed' || r.status === 'denied');
}

/** The state a record restores to: as it was, or, for a session that was running, failed and lost. */
function restoredState(r: SessionRecord, now: number): SessionState {
  if (isPendingApproval(r)) return { status: 'approval_required', interrupt: r.interrupt!, exec: r.pendingExec! };
  const end = { pid: r.pid, endedAt: r.endedAt ?? now, exitCode: r.exitCode, signal: r.signal };
  if (!isEnded(r)) return { status: 'failed', ...end, reason: 'lost', ...(r.error === undefined ? {} : { error: r.error }) };
  if (r.status === 'denied') {
    const reason = r.reason === 'rule' || r.reason === 'refused' || r.reason === 'expired' || r.reason === 'user' ? r.reason : 'rule';
    return { status: 'denied', endedAt: end.endedAt, reason, denial: r.denial ?? 'no reason given' };
  }
  if (r.status === 'failed') return { status: 'failed', ...end, reason: r.reason ?? 'lost', ...(r.error === undefined ? {} : { error: r.error }) };
  return { status: 'completed', ...end };
}

/**
 * A session back from its record, answering list, poll and log as before: a finished one, one
 * still waiting for its approval (which can then be answered), or one that was running when the
 * daemon stopped, now failed with reason "lost".
 */
export function restoreSession(
  r: SessionRecord,
  events: EventBus,
  caps: { maxOutputChars: number; pendingMaxOutputChars: number },
  spool: Spool | undefined,
  now = Date.now(),
): Session {
  return sessionFromRecord(r, events, caps, spool, restoredState(r, now), {
    // Its held changes were waiting for a person: the daemon asks again if they still are (tools/approval/changes.ts).
    restored: isEnded(r) && r.interrupt?.kind === 'changes' ? { changesApproval: r.interrupt } : {},
  });
}

/**
 * A Session made from a record in the given state, with its output put back: what a restart's
 * recovery (restoreSession) and a planned restart's hand-over (session/carry.ts) share.
 * `more`: what the record does not keep that the caller has (the hand-over's scratch, key, waits).
 */
export function sessionFromRecord(
  r: SessionRecord,
  events: EventBus,
  caps: { maxOutputChars: number; pendingMaxOutputChars: number },
  spool: Spool | undefined,
  state: SessionState,
  more: Partial<Omit<SessionInit, 'restored'>> & { restored?: Partial<RestoredParts> } = {},
): Session {
  const { restored, ...init } = more;
  const s = new Session({
    id: r.id,
    scope: r.scope,
    command: r.command,
    name: r.name,
    cwd: r.cwd,
    key: r.key,
    stdin: r.stdin,
    maxOutputChars: Math.max(caps.maxOutputChars, r.output.retained.length),
    pendingMaxOutputChars: Math.max(caps.pendingMaxOutputChars, r.output.pending.length),
    events,
    startedAt: r.startedAt,
    spool,
    pastInterrupts: r.pastInterrupts,
    decision: r.decision,
    ...init,
    restored: {
      state,
      pty: r.pty,
      backgrounded: r.backgrounded,
      stop: r.stop,
      checkpoints: r.checkpoints,
      networkDenied: r.networkDenied,
      resources: r.resources,
      ports: r.ports,
      ...restored,
    },
  });
  s.output.restore(r.output);
  if (r.adopted === 'crash') adoptedAfterCrash.add(s);
  if (r.exitUnknown !== undefined) exitUnknown.set(s, r.exitUnknown);
  return s;
}
