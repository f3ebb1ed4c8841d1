import { forbidden } from '../base/errors.js';
import { ALL_SCOPES } from '../policy/scopes.js';
import type { CallContext, Daemon } from './context.js';

/**
 * `daemon.restart` (SPEC §19), the operator's: the running sessions go to a new daemon image in
 * this PID. Answered just before the image goes; the client then waits for the new one to serve.
 */
export async function restartTool(d: Daemon, ctx: CallContext) {
  if (ctx.scope !== ALL_SCOPES) {
    throw forbidden('daemon.restart is the operator\'s: send scope "*" with the adminToken, or where none is configured the approver credential (procctl daemon restart finds it)');
  }
  const a = await d.restart();
  return {
    ...a,
    text: `Handing ${a.sessions} running session${a.sessions === 1 ? '' : 's'} to a new daemon image (${a.from} -> ${a.to}) in the same process; it serves again in about a second.`,
  };
}
