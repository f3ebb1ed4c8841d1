import { writeFileSync } from 'node:fs';
import type { Session, StopRequest } from '../session/session.js';
import type { StopReason } from '../session/types.js';
import { terminate } from './group.js';
import { escapees, signalPids } from './sweep.js';

export interface StopOptions {
  /** Who stops it. */
  reason: StopReason;
  signal: NodeJS.Signals;
  graceMs: number;
  note?: string;
}

/**
 * The one stop path (kill, timeout, cancel, replace, shutdown): write the stop file, signal the
 * whole group and every process of the session that left it, wait the grace, SIGKILL what is
 * left. Resolves once the session has ended; stopping a session twice is harmless.
 */
export async function stopSession(session: Session, opts: StopOptions): Promise<void> {
  if (!session.running) return;
  if (!session.stop) {
    const request: StopRequest = { reason: opts.reason, signal: opts.signal, at: Date.now(), note: opts.note };
    session.stop = request;
  }
  if (session.stopping) return session.finished;
  session.stopping = true;
  const stop = session.stop;
  writeStopFile(session, stop);
  const pgid = session.pid;
  const outside = escapees(session.id, pgid);
  const { killed } = await terminate({ pgid, pids: outside }, opts.signal, opts.graceMs);
  // Anything forked out of the group during the grace gets no second warning.
  const late = escapees(session.id, pgid);
  signalPids(late, 'SIGKILL');
  stop.escalated = killed || late.length > 0;
  await session.finished;
}

/** Tell the job first, through PROCCTL_STOP_FILE, so it can stop cleanly within the grace. */
function writeStopFile(session: Session, stop: StopRequest): void {
  if (!session.stopFile) return;
  const body = { sessionId: session.id, timestamp: new Date(stop.at).toISOString(), reason: stop.reason, signal: stop.signal };
  try {
    writeFileSync(session.stopFile, `${JSON.stringify(body)}\n`, { mode: 0o600 });
  } catch {
    // The scratch directory may be gone (removed by the job); the signal still goes out.
  }
}
