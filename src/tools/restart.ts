import { forbidden } from '../base/errors.js';
import { ALL_SCOPES } from '../policy/scopes.js';
import type { CallContext, Daemon } from './context.js';
import { sentFrom } from './approval/who.js';

/**
 * `daemon.restart` (SPEC §19), the operator's: the running sessions go to a new daemon image in
 * this PID. Answered just before the image goes; the client then waits for the new one to serve.
 */
export async function restartTool(d: Daemon, ctx: CallContext) {
  if (ctx.scope !== ALL_SCOPES) {
    throw forbidden('daemon.restart is the operator\'s: send scope "*" with the adminToken, or where none is configured the approver credential (procctl daemon restart finds it)');
  }
  // The approver credential beside the socket is readable by an unsandboxed job: a job must not restart the daemon it runs under.
  const where = ctx.caller ? sentFrom(d, ctx, 'so the daemon is not restarted; rebuild the addon (npm rebuild) and restart again') : undefined;
  if (where?.inside) {
    d.log.warn({ peerPid: where.pid, inside: where.inside }, 'refused a daemon.restart sent from inside a session');
    throw forbidden(`daemon.restart cannot be sent from inside a session (this request came from ${where.inside}): a person restarts the daemon, from a shell of their own`);
  }
  const a = await d.restart();
  return {
    ...a,
    text: `Handing ${a.sessions} running session${a.sessions === 1 ? '' : 's'} to a new daemon image (${a.from} -> ${a.to}) in the same process; it serves again in about a second.`,
  };
}
