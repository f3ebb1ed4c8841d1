import { conflict, invalid, notFound, unavailable } from '../../base/errors.js';
import type { ProcessParams } from '../../schema/process.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { execTool } from '../exec.js';
import { forget, forgetAfter } from '../process/forget.js';
import { endLine, execResult, sessionRecord } from '../render.js';
import { beginAnswer, endUnstarted, finishAnswer, isAnswering } from './pending.js';
import { checkAnswerer } from './who.js';
import { noteAnswer } from '../trail.js';
import { judgeCommand, partsOf } from './judge.js';
import { bashLoading } from '../../shell/bash.js';
import { wordsToRemember, type RememberedRule } from '../../policy/remembered.js';
import type { Voice } from '../../schema/voice.js';

/** The call that answers the approval of `s`, yes or no, in the reader's words. */
const answer = (v: Voice, s: Session, confirm: boolean) => v.call({ action: 'resume', sessionId: s.id, input: { confirm } });

/**
 * A process action on a session waiting for its approval (SPEC §8), which has no process yet:
 * `resume` answers the approval, `kill` and `remove` withdraw it (the session ends `denied`),
 * `clear` is refused as for any unfinished session, and actions that need a process are a
 * `conflict`. undefined for `poll`, `log` and `list`, which answer as for any session.
 */
export function unstartedAction(d: Daemon, ctx: CallContext, p: ProcessParams, s: Session): Promise<unknown> | unknown {
  const v = ctx.voice;
  switch (p.action) {
    case 'poll':
    case 'log':
    case 'list':
      return undefined;
    case 'resume':
      return resumeApproval(d, ctx, p, s);
    case 'kill':
      return withdraw(d, s, false, v);
    case 'remove':
      return withdraw(d, s, true, v);
    case 'clear':
      throw notFound(
        `session ${s.id} is waiting for its approval, and clear forgets only finished sessions; ${v.name === 'cli' ? `refuse it with ${answer(v, s, false)}` : `withdraw it with ${v.call({ action: 'kill', sessionId: s.id })}`}, or remove it with ${v.call({ action: 'remove', sessionId: s.id })}`,
        { sessionId: s.id, pending: true },
      );
    default:
      throw conflict(`session ${s.id} has not started: it waits for its approval (${v.name === 'cli' ? `answer it with ${answer(v, s, true)} or ${answer(v, s, false)}` : 'a person answers it; poll it to see when it starts'})`, {
        sessionId: s.id,
      });
  }
}

/** confirm:true starts the exec and answers as exec would have; confirm:false denies it. */
async function resumeApproval(d: Daemon, ctx: CallContext, p: ProcessParams, s: Session) {
  const confirm = p.input?.confirm;
  if (confirm === undefined) {
    throw invalid(`session ${s.id} waits for an approval, answered with ${answer(ctx.voice, s, true)} (run it) or ${answer(ctx.voice, s, false)} (refuse it)`, {
      path: ['input'],
      schema: true,
    });
  }
  checkAnswerer(d, ctx, s);
  const remember = p.input?.remember;
  if (remember && !confirm) throw invalid('remember goes with confirm: true: it keeps a yes as an allow rule', { path: ['input', 'remember'], schema: true });
  // What is remembered is the command's parts, parsed (the daemon loads the parser once it serves).
  const parsing = remember ? bashLoading() : undefined;
  if (parsing) {
    await parsing;
    // While it waited the session may have been answered, withdrawn, removed or expired: this
    // answer then comes second, and is told so as a second answer is.
    if (isAnswering(s)) throw conflict(`the approval of session ${s.id} was already given; it is starting now`, { sessionId: s.id });
    if (!s.awaitingApproval || d.registry.find(s.scope, s.id) !== s) {
      throw conflict(`the approval of session ${s.id} was settled while this answer waited for the bash parser (it is ${s.status} now); nothing was started: poll it to see how it ended`, { sessionId: s.id });
    }
  }
  const kept = remember ? rulesToRemember(d, s, remember) : [];
  if (!beginAnswer(s)) throw conflict(`the approval of session ${s.id} was already given; it is starting now`, { sessionId: s.id });
  const approval = s.interrupt!;
  noteAnswer(d, ctx, s, 'approval', confirm);
  if (!confirm) {
    finishAnswer(d, s, false);
    endUnstarted(d, s, 'refused', 'answered');
    return { ...execResult(s, [], ctx.voice), interruptId: approval.id };
  }
  let started = false;
  try {
    if (d.closing) throw unavailable('the daemon is shutting down and starts no new commands; the approval is still pending, answer it once the daemon is back');
    const pending = s.pendingExec!;
    // Kept before the command starts: the answer holds for the next time whatever happens to this one.
    if (kept.length > 0) d.remembered.add(kept);
    const history = [...s.pastInterrupts, { id: approval.id, kind: approval.kind, reason: approval.reason, createdAt: approval.createdAt, endedAt: Date.now(), outcome: 'answered' as const }];
    // Exactly the exec that was asked for, in its own scope (whoever approves it), never asking the rules again.
    const result = await execTool(d, { scope: s.scope, signal: ctx.signal, cancellation: ctx.cancellation, voice: ctx.voice, caller: ctx.caller }, { ...pending.params, workdir: pending.cwd }, { id: s.id, history, ...(pending.review ? { review: pending.review } : {}), ...(s.decision ? { decision: s.decision } : {}) });
    started = true;
    // ifRunning "keep" found a running session of the key: exec would have started nothing, so the request is gone.
    if (result.sessionId !== s.id && d.registry.find(s.scope, s.id) === s) forgetQuietly(d, s);
    return result;
  } finally {
    finishAnswer(d, s, started);
  }
}

/**
 * The allow rules a remembered yes makes (SPEC §8): one for each part of the command that asked,
 * the exact command or its name and first word; `invalid` (and nothing starts) when a part cannot
 * be remembered that way, or when no rule asked (an elevated approval).
 */
function rulesToRemember(d: Daemon, s: Session, kind: 'command' | 'prefix'): RememberedRule[] {
  const command = s.pendingExec!.params.command;
  const judged = judgeCommand(d.config().approvals, command, s.scope, d.remembered.list());
  const parts = partsOf(command);
  const asked = judged?.parts.map((j, i) => ({ j, part: parts[i] })).filter(({ j, part }) => j.decision === 'ask' && part?.argv) ?? [];
  if (asked.length === 0) {
    throw invalid(`nothing of session ${s.id} can be remembered: no rule asked about a command of it (an elevated approval, or a part that cannot be judged); answer without remember`, { path: ['input', 'remember'], schema: true });
  }
  return asked.map(({ part }) => {
    const words = wordsToRemember(kind, part.argv!);
    if ('problem' in words) throw invalid(`"${part.text}" cannot be remembered as a ${kind}: ${words.problem}`, { path: ['input', 'remember'], schema: true });
    return { scope: s.scope, kind, words, at: Date.now(), from: part.text };
  });
}

/** kill or remove: the approval is withdrawn, nothing runs; remove also forgets the session. */
function withdraw(d: Daemon, s: Session, andForget: boolean, v: Voice) {
  if (isAnswering(s)) throw conflict(`session ${s.id} is being started after its approval; kill it once it runs`, { sessionId: s.id });
  endUnstarted(d, s, 'user', 'ended');
  const record = { ...sessionRecord(s), text: endLine(s, v) };
  return andForget ? forgetAfter(d, s, record) : record;
}

function forgetQuietly(d: Daemon, s: Session): void {
  try {
    forget(d, s);
  } catch (err) {
    d.log.warn({ sessionId: s.id, err: (err as Error).message }, 'the record of an approval that started nothing could not be deleted');
  }
}
