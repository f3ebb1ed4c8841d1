import { forbidden, unavailable } from '../../base/errors.js';
import { scopeRules } from '../../policy/scopes.js';
import { insideSession } from '../../runner/inside.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { cliVoice } from '../../schema/voice.js';

/**
 * May this caller answer the approval of `s` (SPEC §8)? A person answers, not the agent that
 * asked: the request must carry the approver credential (unless the scope trusts its clients with
 * `selfApprove`), and it must not come from inside any session, whatever it carries, so a job
 * cannot approve itself by running `procctl resume`. Throws `forbidden` saying who answers.
 */
export function checkAnswerer(d: Daemon, ctx: CallContext, s: Session, person: string = personText(s)): void {
  const caller = ctx.caller;
  // The daemon's own calls (none today) carry no caller and answer nothing.
  if (!caller) throw forbidden(`the approval of session ${s.id} is answered by a person`);
  const where = sentFrom(d, ctx, `so the approval of session ${s.id} is not answered; rebuild the addon (npm rebuild) and answer again`);
  if (where.inside) {
    d.log.warn({ sessionId: s.id, peerPid: where.pid, inside: where.inside }, 'refused an approval answer sent from inside a session');
    throw forbidden(`an approval cannot be answered from inside a session (this request came from ${where.inside}); ${person}`, { sessionId: s.id });
  }
  if (caller.approver || scopeRules(d.config()).policy(s.scope).selfApprove) return;
  throw forbidden(`the approval of session ${s.id} is answered by a person, not by the agent that asked; ${person}`, { sessionId: s.id });
}

/** What the model is told to do instead: wait, and what the person runs. */
export function personText(s: Session): string {
  const person = cliVoice(s.scope);
  const yes = person.call({ action: 'resume', sessionId: s.id, input: { confirm: true } });
  const no = person.call({ action: 'resume', sessionId: s.id, input: { confirm: false } });
  return `wait for the person: they run ${yes} or ${no} (or answer in their MCP client); poll the session to see whether it started`;
}

/**
 * Where a request comes from: its peer's pid, and which session it is inside (undefined: none).
 * A job must not do what only a person does (answer an approval, restart the daemon), whatever
 * credential it read. Throws `unavailable` (with `then`, what is not done) when the peer's pid
 * cannot be known.
 */
export function sentFrom(d: Daemon, ctx: CallContext, then: string): { pid: number; inside: string | undefined } {
  const pid = ctx.caller!.pid();
  if (typeof pid !== 'number') throw unavailable(`cannot tell whether this request comes from inside a session (${pid.unknown}), ${then}`);
  const groups = new Set<number>();
  for (const r of d.registry.running()) if (r.pid !== undefined) groups.add(r.pid);
  return { pid, inside: insideSession(pid, groups, d.cgroups) };
}
