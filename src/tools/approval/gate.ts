import { compileRules, decide } from '../../policy/approvals.js';
import type { ScopePolicy } from '../../policy/scopes.js';
import type { ExecParams } from '../../schema/exec.js';
import type { CallContext, Daemon } from '../context.js';
import { execResult } from '../render.js';
import { unstartedSession } from './unstarted.js';
import { askApproval, endUnstarted } from './pending.js';

/**
 * Ask the approval rules about an exec before anything runs (SPEC §8). Without rules nothing is
 * done at all, and with rules nothing but the match when none applies. `deny`: a session that
 * never ran, `denied`, is the answer. `ask`: a session waiting for its approval is the answer.
 * `allow`, or no rule matching: undefined, and exec goes on. An elevated exec in a scope whose
 * `elevated` policy is "ask" waits for an approval too (a deny rule still wins).
 */
export function gateExec(d: Daemon, ctx: CallContext, p: ExecParams, cwd: string, policy: ScopePolicy): ReturnType<typeof execResult> | undefined {
  const rules = d.config().approvals.rules;
  // elevated is refused before this (deny) or asked about here (ask), unless a rule decides first.
  const elevatedAsks = p.elevated === true && policy.elevated === 'ask';
  if (rules.length === 0 && !elevatedAsks) return undefined;
  const decision = rules.length === 0 ? undefined : decide(compileRules(rules), p.command, ctx.scope);
  if (decision?.action === 'deny') {
    const s = unstartedSession(d, ctx, p, cwd);
    d.registry.add(s);
    endUnstarted(d, s, 'rule', undefined, decision.rule.reason ?? `the command matches approval rule ${decision.rule.index}`);
    d.keeper.hold(s);
    return execResult(s, [], ctx.voice);
  }
  const ask = decision?.action === 'ask' || elevatedAsks;
  if (!ask || keepsRunningSession(d, ctx, p)) return undefined;
  // One approval answers both questions: the rule's, and whether it may run elevated.
  const why =
    decision?.action === 'ask'
      ? (decision.rule.reason ?? `the command matches approval rule ${decision.rule.index}`)
      : `elevated mode needs an approval in scope "${ctx.scope}" (scopes.${ctx.scope}.elevated is "ask")`;
  const s = unstartedSession(d, ctx, p, cwd);
  askApproval(d, s, p, why, decision?.action === 'ask' ? decision.rule.index : undefined);
  return execResult(s, [], ctx.voice);
}

/** exec would start nothing: `ifRunning: "keep"` and a session of its key runs. Nothing to approve. */
function keepsRunningSession(d: Daemon, ctx: CallContext, p: ExecParams): boolean {
  return p.key !== undefined && p.ifRunning === 'keep' && d.registry.running(ctx.scope).some((s) => s.key === p.key);
}
