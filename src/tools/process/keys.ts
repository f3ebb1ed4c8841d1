import { conflict, invalid } from '../../base/errors.js';
import { hexBytes, keySequence } from '../../runner/keys.js';
import type { ProcessParams } from '../../schema/process.js';
import type { Session } from '../../session/session.js';
import type { CallContext, Daemon } from '../context.js';
import { target } from './target.js';

/** The session, if its input is open; terminal-only actions also need a pty. */
function writable(d: Daemon, ctx: CallContext, p: ProcessParams, needsPty: boolean): Session {
  const s = target(d, ctx, p);
  if (!s.running) throw conflict(`session ${s.id} has ended (${s.status}); there is nothing to type into`);
  if (needsPty && !s.pty) {
    const v = ctx.voice;
    throw conflict(
      `session ${s.id} does not run under a terminal; use ${v.call({ action: 'write', sessionId: s.id })} for its stdin, or ${v.call({ action: 'signal', sessionId: s.id, signal: 'SIGINT' })} to interrupt it (start it with ${v.execOption('pty', true)} for keys)`,
    );
  }
  if (!s.stdinOpen || !s.input) throw conflict(`the input of session ${s.id} is closed (end of input was sent, the job closed it, or it was started with stdin "null")`);
  return s;
}

/** After typing: it answers a pending question as well as resume would, and restarts the quiet period. */
function sent(s: Session, bytes: number, what: string) {
  s.inputSent();
  return { status: s.status, sessionId: s.id, bytes, text: `Sent ${what} to session ${s.id}.` };
}

export function sendKeysAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (!p.keys?.length && !p.hex?.length) throw invalid('send-keys needs keys (names) or hex (bytes)', { path: ['keys'], schema: true });
  const s = writable(d, ctx, p, true);
  // Validate every key before sending any, so a typo sends nothing.
  const parts: (string | Buffer)[] = (p.keys ?? []).map((k) => (p.literal ? k : keySequence(k, s.modes)));
  if (p.hex?.length) parts.push(hexBytes(p.hex));
  let bytes = 0;
  for (const part of parts) {
    bytes += Buffer.byteLength(part);
    s.input!.write(part);
  }
  return sent(s, bytes, p.literal ? 'text' : `${(p.keys ?? []).join(' ')}${p.hex?.length ? ' + hex bytes' : ''}`.trim());
}

/** A carriage return on a terminal (what Enter sends); a newline on a pipe. */
export function submitAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  const s = writable(d, ctx, p, false);
  s.input!.write(s.pty ? '\r' : '\n');
  return sent(s, 1, 'Enter');
}

export function pasteAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (p.text === undefined) throw invalid('paste needs text', { path: ['text'], schema: true });
  const s = writable(d, ctx, p, true);
  const bracketed = p.bracketed ?? s.modes.bracketedPaste;
  const data = bracketed ? `\x1b[200~${p.text}\x1b[201~` : p.text;
  s.input!.write(data);
  return sent(s, Buffer.byteLength(data), bracketed ? 'a bracketed paste' : 'a paste');
}

export function resizeAction(d: Daemon, ctx: CallContext, p: ProcessParams) {
  if (p.cols === undefined || p.rows === undefined) throw invalid('resize needs cols and rows', { path: ['cols'], schema: true });
  const s = target(d, ctx, p);
  if (!s.running || !s.resize) throw conflict(`session ${s.id} has no terminal to resize`);
  s.resize(p.cols, p.rows);
  return { status: s.status, sessionId: s.id, cols: p.cols, rows: p.rows, text: `Resized the terminal of session ${s.id} to ${p.cols}x${p.rows}.` };
}
