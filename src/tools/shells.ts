import { notFound } from '../base/errors.js';
import { ALL_SCOPES } from '../policy/scopes.js';
import { parseParams } from '../schema/parse.js';
import { ShellCloseParamsSchema, ShellListParamsSchema } from '../schema/shell.js';
import type { CallContext, Daemon } from './context.js';

/** `shell.list`: the scope's persistent shells (every scope's with "*"), SPEC §20. */
export function listShells(d: Daemon, ctx: CallContext, raw: unknown) {
  parseParams(ShellListParamsSchema, raw, 'shell.list');
  const shells = d.shells.list(ctx.scope, ctx.scope === ALL_SCOPES);
  const text = shells.length === 0 ? 'No shells.' : shells.map((s) => `${s.name}\t${s.state}${s.sessionId ? ` (${s.sessionId})` : ''}\t${s.cwd}\t${s.commands} commands`).join('\n');
  return { shells, text };
}

/** `shell.close {name}`: the shell goes, and a command running in it ends with it. */
export async function closeShell(d: Daemon, ctx: CallContext, raw: unknown) {
  const p = parseParams(ShellCloseParamsSchema, raw, 'shell.close');
  const closed = await d.shells.close(ctx.scope, p.name);
  if (!closed) throw notFound(`no shell "${p.name}" in scope "${ctx.scope}"; shell.list shows the scope's shells`);
  return { closed, text: `Closed shell ${p.name}.` };
}
