import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { sessionRecord } from '../render.js';

export function listAction(d: Daemon, ctx: CallContext, _p: ProcessParams) {
  const sessions = d.registry.list(ctx.scope).map((s) => sessionRecord(s));
  const running = sessions.filter((s) => s.status === 'running' || s.status === 'waiting_input').length;
  const text =
    sessions.length === 0
      ? 'No sessions.'
      : `${sessions.length} session(s), ${running} running:\n` +
        sessions.map((s) => `${s.sessionId}  ${s.status.padEnd(9)}  ${s.name}`).join('\n');
  return { sessions, text };
}
