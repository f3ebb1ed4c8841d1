import { writeFileSync } from 'node:fs';
import type { Session, StopRequest } from '../session/session.js';
import type { StopReason } from '../session/types.js';
import { terminateAll } from './group.js';
import { findSessionProcesses, oldestLeader, signalPids } from './sweep.js';

export interface StopOptions {
  /** Who stops it. */
  reason: StopReason;
  signal: NodeJS.Signals;
  graceMs: number;
  note?: string;
}

/**
 * The one stop path (kill, kill all, timeout, cancel, replace, shutdown): write each stop file,
 * signal each whole group and every process of the session that left it (found by its
 * environment marker), wait the grace, SIGKILL what is left. Resolves once every session has
 * ended; stopping a session twice is harmless.
 */
export async function stopSessions(sessions: Session[], opts: StopOptions): Promise<void> {
  const starting: Session[] = [];
  for (const s of sessions) {
    if (!s.running) continue;
    s.stop ??= { reason: opts.reason, signal: opts.signal, at: Date.now(), note: opts.note };
    if (s.stopping) continue;
    s.stopping = true;
    writeStopFile(s, s.stop);
    starting.push(s);
  }
  if (starting.length > 0) {
    const ids = new Set(starting.map((s) => s.id));
    const outside = (found: ReturnType<typeof findSessionProcesses>, s: Session) =>
      (found.get(s.id) ?? []).filter((p) => p.pgrp !== s.pid).map((p) => p.pid);
    const from = oldestLeader(starting);
    const before = findSessionProcesses(ids, from);
    for (const s of starting) s.stop!.escalated = false;
    await terminateAll(
      starting.map((s) => ({ pgid: s.pid, pids: outside(before, s) })),
      opts.signal,
      opts.graceMs,
      (i) => (starting[i].stop!.escalated = true),
    );
    // Anything forked out of a group during the grace gets no second warning.
    const after = findSessionProcesses(ids, from);
    for (const s of starting) {
      const late = outside(after, s);
      if (late.length > 0) s.stop!.escalated = true;
      signalPids(late, 'SIGKILL');
    }
  }
  await Promise.all(sessions.map((s) => s.finished));
}

export function stopSession(session: Session, opts: StopOptions): Promise<void> {
  return stopSessions([session], opts);
}

/**
 * Tell the job first, through PROCCTL_STOP_FILE, so it can stop cleanly within the grace:
 * `reason` is the text given to kill (else who stopped it), `by` who stopped it (SPEC §9).
 */
function writeStopFile(session: Session, stop: StopRequest): void {
  if (!session.stopFile) return;
  const body = { sessionId: session.id, timestamp: new Date(stop.at).toISOString(), reason: stop.note ?? stop.reason, by: stop.reason, signal: stop.signal };
  try {
    writeFileSync(session.stopFile, `${JSON.stringify(body)}\n`, { mode: 0o600 });
  } catch {
    // The scratch directory may be gone (removed by the job); the signal still goes out.
  }
}
