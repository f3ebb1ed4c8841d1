import { invalid } from '../../base/errors.js';
import type { ProcessParams } from '../../schema/process.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { sessionRecord } from '../render.js';
import { sessionIn } from './target.js';

const DEFAULT_WAIT_MS = 30_000;
const MAX_WAIT_MS = 120_000;

/** Nothing more happens to it without someone: it ended (a review's changes settled), or it waits for input or an approval. */
const isDone = (s: Session) => (!s.running && !s.settling) || s.interrupt !== undefined;

/**
 * Sleep until any (mode "all": every one) of the sessions has ended or waits for input or an
 * approval, or the timeout passes (SPEC §6). Event-driven: it wakes on the sessions' own changes
 * under one deadline, with no timer per session and nothing polled.
 */
export async function waitAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (!p.sessionIds) throw invalid(`process wait needs sessionIds, the sessions to wait for; list them with ${ctx.voice.call({ action: 'list' })}`, { path: ['sessionIds'], schema: true });
  const ids = [...new Set(p.sessionIds)];
  const sessions = ids.map((id) => sessionIn(d, ctx, id));
  const all = p.mode === 'all';
  const enough = () => (all ? sessions.every(isDone) : sessions.some(isDone));
  const ms = Math.min(p.timeout ?? DEFAULT_WAIT_MS, MAX_WAIT_MS);
  const deadline = AbortSignal.timeout(ms);
  const over = ctx.signal ? AbortSignal.any([deadline, ctx.signal]) : deadline;
  while (!enough() && !over.aborted) {
    // One round: the first change of any session still going; the others' waits are taken back.
    const round = new AbortController();
    const stop = AbortSignal.any([over, round.signal]);
    await Promise.race(sessions.filter((s) => !isDone(s)).map((s) => s.nextChange(stop)));
    round.abort();
  }
  const done = sessions.filter(isDone).map((s) => s.id);
  const records = sessions.map((s) => sessionRecord(s));
  return { sessions: records, done, text: waitText(ctx, records, done, all, ms, enough()) };
}

function waitText(ctx: CallContext, records: { sessionId: string; status: string; name: string }[], done: string[], all: boolean, ms: number, met: boolean): string {
  const lines = records.map((r) => `${r.sessionId}  ${r.status.padEnd(17)}  ${r.name}`);
  const still = records.filter((r) => !done.includes(r.sessionId)).map((r) => r.sessionId);
  const head = met
    ? all
      ? `All ${records.length} session(s) are done (ended, or waiting for input or approval):`
      : `${done.length} of ${records.length} session(s) done (ended, or waiting for input or approval):`
    : `Waited ${ms < 1000 ? `${ms} ms` : `${Math.round(ms / 1000)} s`}: ${done.length} of ${records.length} session(s) done; still running: ${still.join(', ')}. Wait again with ${ctx.voice.call({ action: 'wait', sessionIds: still, ...(all ? { mode: 'all' as const } : {}) })}.`;
  return [head, ...lines].join('\n');
}
