import type { ExecParams } from '../schema/exec.js';
import { deriveName } from '../session/name.js';
import { Session } from '../session/session.js';
import type { CallContext, Daemon } from './context.js';

/**
 * The session an exec makes, before anything runs: exec starts it at once; an approval gate
 * keeps it waiting (or denies it), its record showing the command. An approved exec passes the
 * id of the session that waited, so the caller's id stays the command's.
 */
export function execSession(d: Daemon, ctx: CallContext, p: ExecParams, cwd: string, id = d.registry.newId()): Session {
  const cfg = d.config().tools.exec;
  const s = new Session({
    id,
    scope: ctx.scope,
    command: p.command,
    name: p.name ?? deriveName(p.command),
    cwd,
    stdin: p.stdin ?? 'pipe',
    maxOutputChars: cfg.maxOutputChars,
    pendingMaxOutputChars: cfg.pendingMaxOutputChars,
    events: d.registry.events,
  });
  s.key = p.key;
  return s;
}
