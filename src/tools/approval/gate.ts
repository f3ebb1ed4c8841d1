import type { ScopePolicy } from '../../policy/scopes.js';
import type { ExecParams } from '../../schema/exec.js';
import type { CallContext, Daemon } from '../context.js';
import { execResult } from '../render.js';
import type { Judgement } from '../../policy/approvals.js';
import { decidedBy, decisionOf } from './judge.js';
import { askApproval, endUnstarted } from './pending.js';
import { unstartedSession } from './unstarted.js';
import { noteStarted } from '../trail.js';

/**
 * Act on how the approval rules judged an exec (`judgement`, undefined when the policy judges
 * nothing), before anything runs (SPEC §8). `deny`: a session that never ran, `denied`, is the
 * answer. `ask`: a session waiting for its approval is the answer (approved, it runs in review mode
 * when a part said review). `allow` and `review`: undefined, and exec goes on (in review mode for
 * `review`, which exec decided with the judgement). An elevated exec in a scope whose `elevated`
 * policy is "ask" waits for an approval too (a deny still wins).
 */
export function gateExec(d: Daemon, ctx: CallContext, p: ExecParams, cwd: string, policy: ScopePolicy, judgement: Judgement | undefined): ReturnType<typeof execResult> | undefined {
  // elevated is refused before this (deny) or asked about here (ask), unless a rule denies first.
  const elevatedAsks = p.elevated === true && policy.elevated === 'ask';
  if (judgement?.decision === 'deny') {
    const s = unstartedSession(d, ctx, p, cwd, judgement && decisionOf(judgement));
    d.registry.add(s);
    noteStarted(d, ctx, s, p, { review: false, judgement });
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
  const s = unstartedSession(d, ctx, p, cwd, judgement && decisionOf(judgement));
  noteStarted(d, ctx, s, p, { review: judgement?.review !== undefined, judgement, asked: why });
  askApproval(d, s, p, why, judgement?.decision === 'ask' ? judgement.decided.rule : undefined, judgement?.review && decidedBy(judgement.review));
  return execResult(s, [], ctx.voice);
}

/** exec would start nothing: `ifRunning: "keep"` and a session of its key runs. Nothing to approve. */
function keepsRunningSession(d: Daemon, ctx: CallContext, p: ExecParams): boolean {
  return p.key !== undefined && p.ifRunning === 'keep' && d.registry.running(ctx.scope).some((s) => s.key === p.key);
}
