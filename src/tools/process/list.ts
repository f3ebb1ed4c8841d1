import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { sessionRecord } from '../render.js';
import { ALL_SCOPES } from '../../session/registry.js';

/** Sessions of the scope, newest first: all of them, or the page `[offset, offset + limit)`. */
export function listAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const offset = p.offset ?? 0;
  const page = d.registry.page(ctx.scope, offset, p.limit);
  // An operator's view (scope "*") spans scopes, so each session says whose it is.
  const sessions = page.sessions.map((s) => (ctx.scope === ALL_SCOPES ? { scope: s.scope, ...sessionRecord(s) } : sessionRecord(s)));
  return { sessions, total: page.total, offset, limit: p.limit, text: listText(sessions, page.total, page.running, offset, p.limit) };
}

/** The page for a model or a person: a count, one line per session, and how to get the rest. */
function listText(sessions: { sessionId: string; status: string; name: string; paused?: boolean }[], total: number, running: number, offset: number, limit?: number): string {
  if (total === 0) return 'No sessions.';
  const head = `${total} session(s), ${running} running`;
  if (sessions.length === 0) {
    if (offset < total) return `${head}.`;
    return `${head}; none at offset ${offset}: offsets run from 0 (the newest) to ${total - 1}.`;
  }
  const lines = sessions.map((s) => `${s.sessionId}  ${(s.paused ? 'paused' : s.status).padEnd(9)}  ${s.name}`).join('\n');
  const end = offset + sessions.length;
  if (offset === 0 && end === total) return `${head}:\n${lines}`;
  // There is more after the page only when a limit cut it, so the hint repeats that limit.
  const more = end < total ? `; pass offset:${end}, limit:${limit} for more` : '';
  return `${head}, newest first:\n${lines}\nShowing ${offset + 1}–${end} of ${total}${more}.`;
}
