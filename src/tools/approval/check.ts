import { invalid } from '../../base/errors.js';
import type { CallContext, Daemon } from '../context.js';
import type { Judgement } from '../../policy/approvals.js';
import { decidedBy, judgeCommand } from './judge.js';

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
  const j = judgeCommand(d.config().approvals, command, ctx.scope, d.remembered.list());
  if (!j) {
    return { decision: 'allow', parts: [], text: 'allow: there are no approval rules and approvals.default is "allow", so every command runs (nothing was parsed).' };
  }
  const lines = j.parts.map((p) => `  ${p.decision.padEnd(6)}  ${decidedBy(p)}`);
  const verdict = VERDICT[j.decision] + (j.decision === 'ask' && j.review ? ', then run in review mode (a part of it said review)' : '');
  return { decision: j.decision, parts: j.parts, text: `${j.decision}: ${verdict} (decided by: ${decidedBy(j.decided)})\n${lines.join('\n')}` };
}
