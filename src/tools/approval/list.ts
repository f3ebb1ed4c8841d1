import { interruptView } from '../../interrupt/watcher.js';
import { ALL_SCOPES, scopeRules } from '../../policy/scopes.js';
import type { CallContext, Daemon } from '../context.js';
import { cliVoice } from '../../schema/voice.js';

/**
 * The pending approvals the caller may answer (SPEC §8, `procctl approvals`), commands waiting to
 * run and ended commands whose held changes wait (§16): with the approver
 * credential, every scope's; without it, its own scope's where that scope answers its own
 * (`selfApprove`), else none, and the text says what answering takes. Oldest first.
 */
export function listApprovals(d: Daemon, ctx: CallContext) {
  const approver = ctx.caller?.approver === true;
  const own = ctx.scope !== ALL_SCOPES && scopeRules(d.config()).policy(ctx.scope).selfApprove === true;
  const pending = [...d.registry.all()]
    .filter((s) => (s.awaitingApproval || s.interrupt?.kind === 'changes') && (approver || (own && s.scope === ctx.scope)))
    .sort((a, b) => a.startedAt - b.startedAt);
  const approvals = pending.map((s) => ({
    sessionId: s.id,
    scope: s.scope,
    name: s.name,
    command: s.command,
    cwd: s.cwd,
    interrupt: interruptView(s.interrupt),
  }));
  const lines = approvals.map((a) => {
    const person = cliVoice(a.scope);
    const yes = person.call({ action: 'resume', sessionId: a.sessionId, input: { confirm: true } });
    if (a.interrupt?.kind !== 'changes') return `${a.sessionId} (scope ${a.scope}): ${a.command}\n  why: ${a.interrupt?.reason}; expires ${a.interrupt?.expiresAt}; run it with ${yes}`;
    // Its changes, held after it ran (SPEC §16): the summary, indented, and how to see the diff.
    const no = person.call({ action: 'resume', sessionId: a.sessionId, input: { confirm: false } });
    const summary = (a.interrupt.reason ?? '').split('\n').map((l) => `    ${l}`).join('\n');
    return `${a.sessionId} (scope ${a.scope}): changes of ${a.command}\n${summary}\n  expires ${a.interrupt.expiresAt}; see the diff with ${person.call({ action: 'changes', sessionId: a.sessionId })}, apply with ${yes}, discard with ${no}`;
  });
  const text = approvals.length
    ? `${approvals.length} approval${approvals.length === 1 ? '' : 's'} waiting:\n${lines.join('\n')}`
    : approver || own
      ? 'No approvals are waiting.'
      : 'No approvals you may answer: answering takes the approver credential (procctl sends the one beside the socket, or $PROCCTL_APPROVER_TOKEN).';
  return { approvals, text };
}
