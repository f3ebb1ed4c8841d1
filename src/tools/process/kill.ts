import { stopSession, stopSessions, type StopOptions } from '../../runner/stop.js';
import { normalizeSignal, type ProcessParams } from '../../schema/process.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { endLine, sessionRecord } from '../render.js';
import { afterSettled } from '../approval/changes.js';
import { target } from './target.js';
import type { Voice } from '../../schema/voice.js';

function stopOptions(d: Daemon, p: ProcessParams): StopOptions {
  return {
    reason: 'user',
    signal: p.signal ? normalizeSignal(p.signal) : 'SIGTERM',
    graceMs: p.graceMs ?? d.config().tools.exec.killGraceMs,
    note: p.reason,
  };
}

function finalRecord(s: Session, wasRunning: boolean, v: Voice) {
  const text = wasRunning ? endLine(s, v) : `Session ${s.id} had already ended. ${endLine(s, v)}`;
  return { ...sessionRecord(s), text };
}

/** Stop a session through the one stop path and answer with its final record. */
export async function stopAndRecord(d: Daemon, s: Session, p: ProcessParams, v: Voice) {
  const wasRunning = s.running;
  await stopSession(s, stopOptions(d, p));
  // A review session's record says what its job wrote once that is read (Session.settling); one
  // that had ended before is settled, or being settled, as its end (or the start) asked.
  if (wasRunning) await afterSettled(d, s, () => undefined);
  return finalRecord(s, wasRunning, v);
}

export async function killAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (p.all && !p.sessionId) {
    const running = d.registry.running(ctx.scope);
    await stopSessions(running, stopOptions(d, p));
    await Promise.all(running.map((s) => afterSettled(d, s, () => undefined)));
    const sessions = running.map((s) => finalRecord(s, true, ctx.voice));
    return { sessions, text: sessions.length ? `Stopped ${sessions.length} session(s).` : 'No running sessions to stop.' };
  }
  return stopAndRecord(d, target(d, ctx, p), p, ctx.voice);
}
