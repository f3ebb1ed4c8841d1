import { conflict, invalid, limit } from '../../base/errors.js';
import type { ProcessParams } from '../../schema/process.js';
import type { CallContext, Daemon } from '../context.js';
import { target } from './target.js';

/** Bytes queued to a stdin the job is not reading before further writes are refused. */
const MAX_QUEUED_STDIN = 8 * 1024 * 1024;

export function writeAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = target(d, ctx, p);
  if (p.data === undefined && !p.eof) throw invalid('process write needs data (and/or eof:true)', { path: ['data'], schema: true });
  if (!s.running) throw conflict(`session ${s.id} has ended (${s.status}); its stdin is closed`);
  if (s.stdinMode === 'null') throw conflict(`session ${s.id} was started with stdin "null"; it has no stdin to write to`);
  if (!s.stdinOpen || !s.input) throw conflict(`the stdin of session ${s.id} is closed (eof was sent or the job closed it)`);
  const input = s.input;
  if (input.queued > MAX_QUEUED_STDIN) {
    const v = ctx.voice;
    throw limit(`session ${s.id} is not reading its stdin: ${input.queued} bytes are already queued; ${v.call({ action: 'poll', sessionId: s.id })} shows what it does, ${v.call({ action: 'kill', sessionId: s.id })} stops it`);
  }
  const bytes = p.data === undefined ? 0 : Buffer.byteLength(p.data);
  if (p.data) input.write(p.data);
  // Input written by hand answers a pending question as well as resume would.
  s.inputSent();
  if (p.eof) s.closeInput();
  const what = [`Wrote ${bytes} bytes to`, p.eof ? (s.pty ? 'sent ^D (end of input) to' : 'closed') : ''].filter(Boolean).join(' and ');
  return { status: s.status, sessionId: s.id, bytes, eof: Boolean(p.eof), text: `${what} the stdin of session ${s.id}.` };
}
