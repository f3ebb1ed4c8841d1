import { invalid } from '../../errors.js';
import type { CallContext, Daemon } from '../context.js';
import { decidedBy, judgeCommand } from './judge.js';

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
  const lines = j.parts.map((p) => `  ${p.decision.padEnd(5)}  ${decidedBy(p)}`);
  const verdict = j.decision === 'allow' ? 'it would run' : j.decision === 'ask' ? 'it would wait for a person to approve it' : 'it would be denied, and nothing would run';
  return { decision: j.decision, parts: j.parts, text: `${j.decision}: ${verdict} (decided by: ${decidedBy(j.decided)})\n${lines.join('\n')}` };
}
