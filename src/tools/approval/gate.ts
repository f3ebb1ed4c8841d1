import { compileRules, decide } from '../../policy/approvals.js';
import type { ExecParams } from '../../schema/exec.js';
import type { CallContext, Daemon } from '../context.js';
import { execResult } from '../render.js';
import { askApproval, endUnstarted, unstartedSession } from './pending.js';

/**
 * Ask the approval rules about an exec before anything runs (SPEC §8). Without rules nothing is
 * done at all, and with rules nothing but the match when none applies. `deny`: a session that
 * never ran, `denied`, is the answer. `ask`: a session waiting for its approval is the answer.
 * `allow`, or no rule matching: undefined, and exec goes on.
 */
export function gateExec(d: Daemon, ctx: CallContext, p: ExecParams, cwd: string): ReturnType<typeof execResult> | undefined {
  const rules = d.config().approvals.rules;
  if (rules.length === 0) return undefined;
  const decision = decide(compileRules(rules), p.command, ctx.scope);
  if (decision === undefined || decision.action === 'allow') return undefined;
  const { rule } = decision;
  if (decision.action === 'ask' && keepsRunningSession(d, ctx, p)) return undefined;

  const s = unstartedSession(d, ctx, p, cwd);
  const why = rule.reason ?? `the command matches approval rule ${rule.index}`;
  if (decision.action === 'deny') {
    d.registry.add(s);
    endUnstarted(d, s, 'rule', undefined, why);
    d.hold(s);
    return execResult(s);
  }
  askApproval(d, s, p, why, rule.index);
  return execResult(s);
}

/** exec would start nothing: `ifRunning: "keep"` and a session of its key runs. Nothing to approve. */
function keepsRunningSession(d: Daemon, ctx: CallContext, p: ExecParams): boolean {
  return p.key !== undefined && p.ifRunning === 'keep' && d.registry.running(ctx.scope).some((s) => s.key === p.key);
}
