import { invalid, notFound } from '../../base/errors.js';
import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';

/** The session an action is about; `sessionId` is required by every action but list and kill-all. */
export function target(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (!p.sessionId) {
    throw invalid(`process ${p.action} needs sessionId; list sessions with ${ctx.voice.call({ action: 'list' })}`, { path: ['sessionId'], schema: true });
  }
  return sessionIn(d, ctx, p.sessionId);
}

/** The session `id` of the caller's scope; else `not_found`, saying how to list them in the caller's words. */
export function sessionIn(d: Daemon, ctx: CallContext, id: string) {
  const s = d.registry.find(ctx.scope, id);
  if (s) return s;
  const list = ctx.voice.call({ action: 'list' });
  // Whether it lives in another scope is not said (scopes keep their sessions to themselves), only that it may.
  const elsewhere = ctx.voice.name === 'cli' ? 'pass --scope NAME (and --token) if it was started in another scope' : 'if it was started in another scope, ask in that scope';
  throw notFound(`no session "${id}" in scope "${ctx.scope}"; list sessions with ${list} (finished sessions are forgotten after their TTL), or ${elsewhere}`);
}
