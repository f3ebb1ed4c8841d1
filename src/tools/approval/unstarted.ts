import type { ExecParams } from '../../schema/exec.js';
import { deriveName } from '../../session/name.js';
import { Session, type SessionDecision } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';

/**
 * The session of an exec that an approval gate stops before anything runs: it waits for its
 * approval, or is denied, its record showing the command. An exec that runs is started by
 * runner/start.ts, under the id of the one that waited when it was approved.
 */
export function unstartedSession(d: Daemon, ctx: CallContext, p: ExecParams, cwd: string, decision?: SessionDecision): Session {
  const cfg = d.config().tools.exec;
  return new Session({
    id: d.registry.newId(),
    scope: ctx.scope,
    command: p.command,
    name: p.name ?? deriveName(p.command),
    cwd,
    key: p.key,
    stdin: p.stdin ?? 'pipe',
    maxOutputChars: cfg.maxOutputChars,
    pendingMaxOutputChars: cfg.pendingMaxOutputChars,
    events: d.registry.events,
    decision,
  });
}
