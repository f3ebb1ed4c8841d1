import { invalid } from '../../errors.js';
import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';

/** The session an action is about; `sessionId` is required by every action but list and kill-all. */
export function target(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (!p.sessionId) throw invalid(`process ${p.action} needs sessionId; list sessions with process {action:"list"}`, { path: ['sessionId'], schema: true });
  return d.registry.get(ctx.scope, p.sessionId);
}
