import { invalid } from '../../base/errors.js';
import type { CallContext, Daemon } from '../context.js';
import type { Judgement } from '../../policy/approvals.js';
import { decidedBy, judgeCommand, judgeReady } from './judge.js';
import { credentialSummary } from '../../sandbox/credentials.js';

const VERDICT: Record<Judgement['decision'], string> = {
  allow: 'it would run',
  review: 'it would run at once in review mode, its changes held until a person applies them',
  ask: 'it would wait for a person to approve it',
  deny: 'it would be denied, and nothing would run',
};

/**
 * `policy.check {command}` (SPEC §8): how the approval rules would judge a command line in the
 * caller's scope, part by part, and which rule decided; nothing runs.
 */
export function policyCheck(d: Daemon, ctx: CallContext, params: Record<string, unknown>) {
  const { command, ...extra } = params;
  const unknown = Object.keys(extra)[0];
  if (unknown) throw invalid(`invalid policy.check params: unknown parameter "${unknown}"`, { path: [unknown], schema: true });
  if (typeof command !== 'string' || command.length === 0) throw invalid('policy.check needs command: the command line to judge', { path: ['command'], schema: true });
  // Judged at once when the parser is loaded, else once it is (the daemon loads it once it serves).
  const parsing = judgeReady(d.config().approvals);
  return parsing ? parsing.then(() => checked(d, ctx, command)) : checked(d, ctx, command);
}

function checked(d: Daemon, ctx: CallContext, command: string) {
  const j = judgeCommand(d.config().approvals, command, ctx.scope, d.remembered.list());
  const creds = credentialLines(d, ctx.scope);
  if (!j) {
    return { decision: 'allow', parts: [], ...creds.field, text: `allow: there are no approval rules and approvals.default is "allow", so every command runs (nothing was parsed).${creds.text}` };
  }
  const lines = j.parts.map((p) => `  ${p.decision.padEnd(6)}  ${decidedBy(p)}`);
  const verdict = VERDICT[j.decision] + (j.decision === 'ask' && j.review ? ', then run in review mode (a part of it said review)' : '');
  return { decision: j.decision, parts: j.parts, ...creds.field, text: `${j.decision}: ${verdict} (decided by: ${decidedBy(j.decided)})\n${lines.join('\n')}${creds.text}` };
}

/** The credentials the scope's sandboxed sessions get (SPEC §21): names, hosts and header, never values. */
function credentialLines(d: Daemon, scope: string): { field: { credentials?: ReturnType<typeof credentialSummary> }; text: string } {
  const config = d.config();
  const list = config.sandbox.mode === 'off' ? [] : credentialSummary(config, scope);
  if (list.length === 0) return { field: {}, text: '' };
  const lines = list.map((c) => `  ${c.name}: ${c.hosts.join(', ')} (written into ${c.header}; the job holds a placeholder in $${c.variable})`);
  return { field: { credentials: list }, text: `\ncredentials its sandboxed sessions use without seeing them:\n${lines.join('\n')}` };
}
