import type { ScopePolicy } from '../../policy/scopes.js';
import type { ExecParams } from '../../schema/exec.js';
import type { CallContext, Daemon } from '../context.js';
import { execResult } from '../render.js';
import { decidedBy, judgeCommand } from './judge.js';
import { askApproval, endUnstarted } from './pending.js';
import { unstartedSession } from './unstarted.js';

/**
 * Ask the approval rules about an exec before anything runs (SPEC §8). Without rules (and with
 * everything allowed) nothing is done at all. `deny`: a session that never ran, `denied`, is the
 * answer. `ask`: a session waiting for its approval is the answer. `allow`: undefined, and exec
 * goes on. An elevated exec in a scope whose `elevated` policy is "ask" waits for an approval too
 * (a deny still wins).
 */
export function gateExec(d: Daemon, ctx: CallContext, p: ExecParams, cwd: string, policy: ScopePolicy): ReturnType<typeof execResult> | undefined {
  // elevated is refused before this (deny) or asked about here (ask), unless a rule denies first.
  const elevatedAsks = p.elevated === true && policy.elevated === 'ask';
  const judgement = judgeCommand(d.config().approvals, p.command, ctx.scope, d.remembered.list());
  if (judgement?.decision === 'deny') {
    const s = unstartedSession(d, ctx, p, cwd);
    d.registry.add(s);
    endUnstarted(d, s, 'rule', undefined, decidedBy(judgement.decided));
    d.keeper.hold(s);
    return execResult(s, [], ctx.voice);
  }
  const ask = judgement?.decision === 'ask' || elevatedAsks;
  if (!ask || keepsRunningSession(d, ctx, p)) return undefined;
  // One approval answers both questions: the rules', and whether it may run elevated.
  const why =
    judgement?.decision === 'ask'
      ? decidedBy(judgement.decided)
      : `elevated mode needs an approval in scope "${ctx.scope}" (scopes.${ctx.scope}.elevated is "ask")`;
  const s = unstartedSession(d, ctx, p, cwd);
  askApproval(d, s, p, why, judgement?.decision === 'ask' ? judgement.decided.rule : undefined);
  return execResult(s, [], ctx.voice);
}

/** exec would start nothing: `ifRunning: "keep"` and a session of its key runs. Nothing to approve. */
function keepsRunningSession(d: Daemon, ctx: CallContext, p: ExecParams): boolean {
  return p.key !== undefined && p.ifRunning === 'keep' && d.registry.running(ctx.scope).some((s) => s.key === p.key);
}
