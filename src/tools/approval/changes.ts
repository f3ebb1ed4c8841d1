import { randomBytes } from 'node:crypto';
import { ALL_SCOPES } from '../../config/schema.js';
import { conflict, invalid } from '../../base/errors.js';
import { interruptView } from '../../interrupt/watcher.js';
import type { ProcessParams } from '../../schema/process.js';
import { cliVoice } from '../../schema/voice.js';
import type { Interrupt, Session } from '../../session/session.js';
import type { HeldSummary } from '../../changes/held.js';
import type { CallContext, Daemon } from '../context.js';
import { statLine, totalsLine } from '../stat.js';
import { checkAnswerer } from './who.js';
import { disarm, expireAt } from './expiry.js';

/**
 * Review as an approval (SPEC §16, §8): a command a rule said "review" for ran at once in review
 * mode; once it ended, what it holds waits for a person, as an interrupt of kind `changes` on the
 * ended session. `confirm: true` applies, `false` discards, and only a person answers (§8's rules,
 * who.ts). Unanswered by approvals.timeoutSeconds, the question expires and the changes stay
 * pending: a person may still review and apply them. Only a person applies them, then or later.
 */

/** How many changed paths the question lists before it points at `changes`. */
const PATHS_SHOWN = 20;
/** The longest the question's summary gets. */
const REASON_CHARS = 2000;


/**
 * Ask a person about the changes `s` holds: the interrupt (its record written with it), an
 * `approval_required` event, and its expiry. Called once its job ended and its changes are pending.
 */
export function askChangesApproval(d: Daemon, s: Session): void {
  const stat = d.held.statNow(s.id);
  const now = Date.now();
  const interrupt: Interrupt = {
    id: `apr_${randomBytes(6).toString('hex')}`,
    kind: 'changes',
    reason: statSummary(s, stat.files.map(statLine), totalsLine(stat.totals, stat.workspace)),
    fields: [{ name: 'confirm', type: 'confirm', label: `Apply these changes to ${stat.workspace}?`, required: true }],
    createdAt: now,
    expiresAt: now + d.config().approvals.timeoutSeconds * 1000,
  };
  s.awaitChangesApproval(interrupt);
  expireAt(s, s.interrupt!.expiresAt, () => expire(d, s));
  s.emit('approval_required', { interrupt: interruptView(interrupt), name: s.name, command: s.command, cwd: s.cwd });
  d.log.info({ sessionId: s.id, scope: s.scope, files: stat.totals.files, expiresAt: new Date(interrupt.expiresAt).toISOString() }, 'changes wait for approval');
}

/** The `--stat` summary a person decides on: the totals, then the paths (capped, pointing at the rest). */
function statSummary(s: Session, lines: string[], totals: string): string {
  const more = lines.length - PATHS_SHOWN;
  const shown = lines.slice(0, PATHS_SHOWN);
  if (more > 0) shown.push(`… and ${more} more: ${cliVoice(s.scope).call({ action: 'changes', sessionId: s.id })} lists them all`);
  const text = `${s.command.length > 200 ? `${s.command.slice(0, 200)}…` : s.command} changed ${totals}\n${shown.join('\n')}`;
  return text.length > REASON_CHARS ? `${text.slice(0, REASON_CHARS)}…` : text;
}

/**
 * At start, after the sessions and the held changes are back: a question that was open is open
 * again (its expiry counts from when it was asked), one whose changes are no longer pending is
 * over, and changes a crash left without their question (the job ran when the daemon died) get one.
 */
export function restoreChangesApprovals(d: Daemon): void {
  for (const s of d.registry.all()) {
    if (s.running || s.awaitingApproval) continue;
    const open = s.interrupt?.kind === 'changes';
    const waits = s.changes?.pending === true && d.held.needsApproval(s.id);
    if (open && !waits) s.settleChangesApproval('ended');
    else if (open) expireAt(s, s.interrupt!.expiresAt, () => expire(d, s));
    else if (waits && !s.pastInterrupts.some((i) => i.kind === 'changes')) askChangesApproval(d, s);
  }
}

/** Review sessions whose upper tree is being read (held.ts settleOff): whoever else asks waits for the same read. */
const settling = new WeakMap<Session, Promise<Session>>();

/**
 * A review session that has ended: its changes become pending (or nothing is held), and an
 * approval where a rule said review, before anyone is told of its end. Its tree is read on the
 * changes' thread, so the session is given back once that is done; any other session at once.
 */
export function settleChanges(d: Daemon, s: Session): Session | Promise<Session> {
  if (!s.settling) return s;
  let read = settling.get(s);
  if (read === undefined) {
    read = d.held.settleOff(s.id).then(
      (summary) => settled(d, s, () => summary),
      (err: Error) =>
        settled(d, s, () => {
          throw err;
        }),
    );
    settling.set(s, read);
  }
  return read;
}

/**
 * A review whose job outlived the last run (its processes being stopped at start): settled, in
 * line, once they are gone, never read while one may still write; whoever asks about it meanwhile
 * (a kill, a clear, a wait) waits for that same settle instead of starting one.
 */
export function settleOnceGone(d: Daemon, s: Session, gone: Promise<unknown>): void {
  const read = gone.then(
    () => settled(d, s, () => d.held.settle(s.id)),
    () => settled(d, s, () => d.held.settle(s.id)),
  );
  settling.set(s, read);
}

/**
 * What a settle found (`summary`, which throws where it failed), noted on the session. One that
 * failed past reading (its record not written: the state directory refuses) leaves the changes
 * pending all the same, with why; a question that cannot be put is logged. Either way its end goes on.
 */
function settled(d: Daemon, s: Session, summary: () => HeldSummary | undefined): Session {
  settling.delete(s);
  if (!s.settling) return s;
  let found: HeldSummary | undefined;
  try {
    found = summary();
  } catch (err) {
    d.log.error({ err, sessionId: s.id }, 'settling the changes of a review session failed');
    found = d.held.failedToSettle(s.id, err as Error);
  }
  try {
    return noteSettled(d, s, found);
  } catch (err) {
    d.log.error({ err, sessionId: s.id }, 'asking about the changes of a review session failed');
    return s;
  }
}

/** `then` once the session's changes are settled: in this turn for any session not settling. */
export function afterSettled<T>(d: Daemon, s: Session, then: (s: Session) => T): T | Promise<T> {
  const settled = settleChanges(d, s);
  return settled instanceof Promise ? settled.then(then) : then(settled);
}

/** What a review's end left, on the session; and the question where a rule said review (SPEC §16). */
function noteSettled(d: Daemon, s: Session, summary: HeldSummary | undefined): Session {
  s.noteChanges(summary);
  if (s.changes?.pending && d.held.needsApproval(s.id)) askChangesApproval(d, s);
  return s;
}

/** Unanswered in time: the question is over, the changes stay pending for a person to review. */
function expire(d: Daemon, s: Session): void {
  if (s.interrupt?.kind !== 'changes' || d.registry.find(ALL_SCOPES, s.id) !== s) return;
  // Shutting down: it stays open, and the next start expires it.
  if (d.closing) return;
  s.settleChangesApproval('expired');
  d.log.info({ sessionId: s.id, scope: s.scope }, 'changes approval expired; the changes stay pending');
}

/** What the model is told instead of applying its own changes: wait, and what the person runs. */
function personText(s: Session): string {
  const person = cliVoice(s.scope);
  const look = person.call({ action: 'changes', sessionId: s.id });
  const yes = person.call({ action: 'resume', sessionId: s.id, input: { confirm: true } });
  const no = person.call({ action: 'resume', sessionId: s.id, input: { confirm: false } });
  const apply = person.call({ action: 'apply', sessionId: s.id });
  return `wait for the person: they look at ${look} and apply them with ${s.interrupt?.kind === 'changes' ? `${yes} or drop them with ${no}` : apply} (or answer in their MCP client); poll the session to see what became of them`;
}

/**
 * May this caller apply the changes of `s`? Those a rule held for a person only with §8's answer
 * of a person (the approver credential, or the scope's selfApprove; never from inside a session),
 * so the agent cannot apply what the gate held. Other review sessions: anyone of the scope.
 */
export function checkApplier(d: Daemon, ctx: CallContext, s: Session): void {
  if (d.held.needsApproval(s.id)) checkAnswerer(d, ctx, s, personText(s));
}

/** An apply or discard happened: the session shows where its changes stand, and a question about what is no longer pending is over. */
export function afterDecision(d: Daemon, ctx: CallContext, s: Session, answered: boolean): void {
  s.noteChanges(d.held.summary(s.id));
  if (s.interrupt?.kind !== 'changes' || s.changes?.pending) return;
  disarm(s);
  s.settleChangesApproval(answered || ctx.caller?.approver ? 'answered' : 'ended');
}

/**
 * Changes approvals whose answer is being carried out (its apply or discard waits for, or runs
 * on, the changes' thread): the question is still open until that is done, and a second answer
 * meanwhile is refused instead of being noted and carried out after it.
 */
const answering = new WeakSet<Interrupt>();

/**
 * `resume` of a changes approval, checked as any approval answer (who.ts): the person's yes
 * (apply) or no (discard), and the question it answers, held as being answered until `done`.
 * process/changes.ts carries it out.
 */
export function changesAnswer(d: Daemon, ctx: CallContext, p: ProcessParams, s: Session): { confirm: boolean; interruptId: string; done: () => void } {
  const v = ctx.voice;
  const confirm = p.input?.confirm;
  const yes = v.call({ action: 'resume', sessionId: s.id, input: { confirm: true } });
  const no = v.call({ action: 'resume', sessionId: s.id, input: { confirm: false } });
  if (confirm === undefined) throw invalid(`the changes of session ${s.id} wait for an approval, answered with ${yes} (apply them) or ${no} (discard them)`, { path: ['input'], schema: true });
  if (p.input?.remember) throw invalid('remember keeps a yes to run a command as an allow rule; a changes approval runs nothing: answer without remember', { path: ['input', 'remember'], schema: true });
  checkAnswerer(d, ctx, s, personText(s));
  const i = s.interrupt;
  if (i?.kind !== 'changes') throw conflict(`the changes approval of session ${s.id} was already answered`, { sessionId: s.id });
  if (answering.has(i)) {
    throw conflict(`the changes approval of session ${s.id} is being answered this moment (its changes are being applied or discarded); poll the session to see what became of them`, { sessionId: s.id });
  }
  answering.add(i);
  return { confirm, interruptId: i.id, done: () => answering.delete(i) };
}
