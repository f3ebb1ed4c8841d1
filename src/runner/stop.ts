import { writeFileSync } from 'node:fs';
import type { Session, StopRequest } from '../session/session.js';
import type { StopReason } from '../session/types.js';
import { terminateGroup } from './group.js';

export interface StopOptions {
  /** Who stops it. */
  reason: StopReason;
  signal: NodeJS.Signals;
  graceMs: number;
  note?: string;
}

/**
 * The one stop path: signal the whole group, wait the grace, SIGKILL what is left. Resolves once
 * the session has ended. Stopping a session that is already stopping or ended is harmless.
 */
export async function stopSession(session: Session, opts: StopOptions): Promise<void> {
  if (!session.running) return;
  if (!session.stop) {
    const request: StopRequest = { reason: opts.reason, signal: opts.signal, at: Date.now(), note: opts.note };
    session.stop = request;
  }
  if (session.stopping) return session.finished;
  session.stopping = true;
  writeStopFile(session, session.stop ?? { reason: opts.reason, signal: opts.signal, at: Date.now() });
  const pgid = session.pid;
  if (pgid !== undefined) await terminateGroup(pgid, opts.signal, opts.graceMs);
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
