import { forbidden, unavailable } from '../base/errors.js';
import type { VerifyResult } from '../audit/verify.js';
import { historyOffThread, verifyOffThread } from '../audit/thread.js';
import { ALL_SCOPES } from '../policy/scopes.js';
import { HistoryParamsSchema, timeOf, VerifyParamsSchema } from '../schema/history.js';
import { parseParams } from '../schema/parse.js';
import type { CallContext, Daemon } from './context.js';

/** The last verify this daemon ran, for daemon.status. */
let lastVerify: { at: string; ok: boolean; records: number; firstBad?: VerifyResult['firstBad'] } | undefined;

export const lastVerifyOf = () => lastVerify;

/**
 * `audit.verify` (SPEC §18), the operator's only: what was written so far is flushed, then the
 * whole trail is read and its chain followed; the newest line is also held against what this
 * daemon last wrote, so an edit of it is seen too. On a thread of its own: the daemon serves
 * everyone else meanwhile.
 */
export async function auditVerify(d: Daemon, ctx: CallContext, raw: unknown): Promise<VerifyResult & { text: string }> {
  parseParams(VerifyParamsSchema, raw, 'audit.verify');
  if (ctx.scope !== ALL_SCOPES) throw forbidden('audit.verify is the operator\'s: send scope "*" with the adminToken, or where none is configured the approver credential (procctl audit verify sends them)');
  if (!d.trail.enabled) throw unavailable('the audit trail is off (audit.enabled is false in the config): there is nothing to verify');
  await d.trail.flushed();
  const r = await verifyOffThread(d.trail.dir, d.trail.lastWritten());
  lastVerify = { at: new Date().toISOString(), ok: r.ok, records: r.records, ...(r.firstBad ? { firstBad: r.firstBad } : {}) };
  return { ...r, text: verifyText(r) };
}

function verifyText(r: VerifyResult): string {
  const counted = `${r.records} record${r.records === 1 ? '' : 's'} in ${r.files} file${r.files === 1 ? '' : 's'}`;
  const notes = [
    ...(r.torn ?? []).map((t) => `a record torn by a crash at ${t.file}:${t.line}, and the trail goes on after it`),
    ...(r.lost ? [`${r.lost} record${r.lost === 1 ? '' : 's'} the daemon could not write, said in the trail`] : []),
    ...(r.removed ? [`${r.removed} old file${r.removed === 1 ? '' : 's'} removed by audit.maxBytes or audit.days, each on record`] : []),
  ];
  if (r.ok) return [`The audit trail is whole: ${counted}.`, ...notes.map((n) => `Note: ${n}.`)].join('\n');
  const b = r.firstBad!;
  const what = {
    changed: 'was changed (its hash is not the one the next record holds)',
    missing: 'follows a record that is missing',
    reordered: 'is out of order',
    torn: 'is torn: the daemon stopped while writing it (a crash); the next start goes on after it',
  }[b.why];
  return `The audit trail is NOT whole: the record at ${b.file} line ${b.line} ${what}. Verified before it: ${counted}.`;
}

/** `history` (SPEC §18): sessions from the trail, a scope's own or (the operator) every scope's. */
export async function historyTool(d: Daemon, ctx: CallContext, raw: unknown) {
  const p = parseParams(HistoryParamsSchema, raw, 'history');
  if (!d.trail.enabled) throw unavailable('the audit trail is off (audit.enabled is false in the config), and history is answered from it');
  const operator = ctx.scope === ALL_SCOPES;
  if (!operator && p.ofScope !== undefined && p.ofScope !== ctx.scope) {
    throw forbidden(`a scope sees its own history only: ofScope "${p.ofScope}" needs the operator (scope "*" with the adminToken)`, { path: ['ofScope'] });
  }
  await d.trail.flushed();
  const now = Date.now();
  // On a thread of its own, like verify: without `since` it reads every file of the trail.
  const answer = await historyOffThread(d.trail.dir, {
    since: p.since === undefined ? undefined : timeOf(p.since, now),
    until: p.until === undefined ? undefined : timeOf(p.until, now),
    scope: operator ? p.ofScope : ctx.scope,
    status: p.status,
    grep: p.grep,
    sessionId: p.sessionId,
    offset: p.offset,
    limit: p.limit,
  });
  const shown = answer.sessions.length;
  const text =
    p.sessionId !== undefined
      ? shown === 0
        ? `No session ${p.sessionId} in the audit trail${operator ? '' : ` of scope "${ctx.scope}"`}.`
        : `Session ${p.sessionId}: ${answer.records?.length ?? 0} records.`
      : `${answer.total} session${answer.total === 1 ? '' : 's'}${shown < answer.total ? `, ${shown} shown from ${answer.offset}` : ''}.`;
  return { ...answer, text };
}
