import { conflict, invalid } from '../../base/errors.js';
import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { target } from './target.js';

/** Answer the pending interrupt once (SPEC §7): confirm → y/n, text, or eof. */
export function resumeAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  const poll = ctx.voice.call({ action: 'poll', sessionId: s.id });
  const pending = s.interrupt;
  if (!pending) {
    const last = s.pastInterrupts[s.pastInterrupts.length - 1];
    const why = last ? ` (the last one was ${last.outcome})` : '';
    throw conflict(`session ${s.id} has no pending interrupt${why}; ${poll} shows what it is doing`);
  }
  const input = p.input;
  if (!input) throw invalid('resume needs input: {confirm: true|false}, {text: "..."} or {eof: true}', { path: ['input'], schema: true });
  if (!s.input) throw conflict(`the input of session ${s.id} is closed (end of input was sent, the job closed it, or it was started with stdin "null")`);
  const enter = s.pty ? '\r' : '\n';
  let answer: string;
  if (input.eof) {
    s.closeInput();
    answer = 'end of input';
  } else if (input.confirm !== undefined) {
    s.input.write(`${input.confirm ? 'y' : 'n'}${enter}`);
    answer = input.confirm ? 'yes' : 'no';
  } else if (input.text !== undefined) {
    const option = pending.fields[0]?.options?.find((o) => o.label === input.text);
    s.input.write(`${option ? option.value : input.text}${enter}`);
    answer = pending.kind === 'secret' ? 'the secret' : JSON.stringify(option ? option.value : input.text);
  } else {
    throw invalid('resume input must have one of confirm, text or eof', { path: ['input'], schema: true });
  }
  s.settleInterrupt('answered');
  return { status: s.status, sessionId: s.id, interruptId: pending.id, text: `Answered "${pending.reason}" with ${answer}; session ${s.id} runs on. ${poll} shows what comes next.` };
}
