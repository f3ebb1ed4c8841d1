import { stopSession } from '../../runner/stop.js';
import { normalizeSignal, type ProcessParams } from '../../schema/process.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { endLine, sessionRecord } from '../render.js';
import { target } from './target.js';

/** Stop a session through the one stop path and answer with its final record. */
export async function stopAndRecord(d: Daemon, s: Session, p: ProcessParams) {
  const wasRunning = s.running;
  await stopSession(s, {
    reason: 'user',
    signal: p.signal ? normalizeSignal(p.signal) : 'SIGTERM',
    graceMs: p.graceMs ?? d.config().tools.exec.killGraceMs,
    note: p.reason,
  });
  const record = sessionRecord(s);
  const text = wasRunning ? endLine(s) : `Session ${s.id} had already ended. ${endLine(s)}`;
  return { ...record, text };
}

export async function killAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (p.all && !p.sessionId) {
    const sessions = await Promise.all(d.registry.running(ctx.scope).map((s) => stopAndRecord(d, s, p)));
    return { sessions, text: sessions.length ? `Stopped ${sessions.length} session(s).` : 'No running sessions to stop.' };
  }
  return stopAndRecord(d, target(d, ctx, p), p);
}
