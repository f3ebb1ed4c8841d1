import { exec, forget, pollToEnd, proc, type Agent } from '../agent.js';
import { check, same } from '../record.js';

const WORDS = ['soak', 'alpha', 'build', 'deploy', 'later', 'ok'];

/** A confirmation prompt on a pipe, seen within the exec's yield or through the event, answered with resume. */
export async function promptResume(a: Agent): Promise<void> {
  const yes = a.rand.chance(0.5);
  const viaEvent = a.rand.chance(0.4);
  const r = await exec(a, {
    command: `printf 'Proceed? [y/N] '; read a; echo "answer=$a"`,
    ...(viaEvent ? { background: true } : { yieldMs: 10_000 }),
  });
  const interrupt = viaEvent ? (await a.events.next('waiting_input', r.sessionId, 10_000)).interrupt : r.interrupt;
  if (!viaEvent) same(r.status, 'waiting_input', 'status at the yield');
  same(interrupt?.kind, 'confirm', 'interrupt kind');
  const answered = await proc(a, 'resume', { sessionId: r.sessionId, input: { confirm: yes } });
  same(answered.interruptId, interrupt.id, 'answered interrupt');
  const { output, last } = await pollToEnd(a, r.sessionId);
  same(last.exitCode, 0, 'exit code');
  check(output.endsWith(`answer=${yes ? 'y' : 'n'}\n`), `output does not end with the answer: ${JSON.stringify(output)}`);
  await forget(a, r.sessionId);
}

/** A prompt on a terminal, answered with resume, with send-keys, or by writing to it. */
export async function ptyPrompt(a: Agent): Promise<void> {
  const word = a.rand.pick(WORDS);
  const r = await exec(a, { command: `read -p "Your name? " n; echo "hello $n"`, pty: true, yieldMs: 10_000 });
  same(r.status, 'waiting_input', 'status at the yield');
  same(r.interrupt?.kind, 'text', 'interrupt kind');
  const how = a.rand.int(0, 2);
  if (how === 0) await proc(a, 'resume', { sessionId: r.sessionId, input: { text: word } });
  else if (how === 1) {
    await proc(a, 'send-keys', { sessionId: r.sessionId, keys: [word], literal: true });
    await proc(a, 'submit', { sessionId: r.sessionId });
  } else await proc(a, 'write', { sessionId: r.sessionId, data: `${word}\r` });
  const { output, last } = await pollToEnd(a, r.sessionId);
  same(last.exitCode, 0, 'exit code');
  check(output.endsWith(`hello ${word}\r\n`), `terminal output does not end with the greeting: ${JSON.stringify(output)}`);
  await forget(a, r.sessionId);
}

/** A job reading its input with no prompt: noticed after the quiet period, answered with write. */
export async function readWrite(a: Agent): Promise<void> {
  const x = a.rand.int(1, 999);
  const y = a.rand.int(1, 999);
  const r = await exec(a, { command: `read a; read b; echo "sum=$((a+b))"`, background: true });
  const ev = await a.events.next('waiting_input', r.sessionId, 10_000);
  same(ev.interrupt?.kind, 'text', 'interrupt kind');
  const w = await proc(a, 'write', { sessionId: r.sessionId, data: `${x}\n${y}\n` });
  same(w.bytes, `${x}\n${y}\n`.length, 'bytes written');
  const done = await a.events.next('exited', r.sessionId, 10_000);
  same(done.status, 'completed', 'exited event status');
  const { output, last } = await pollToEnd(a, r.sessionId);
  same(last.exitCode, 0, 'exit code');
  same(output, `sum=${x + y}\n`, 'output');
  await forget(a, r.sessionId);
}

/** `cat` fed in pieces, then its input closed: it echoes everything and exits. */
export async function catEof(a: Agent): Promise<void> {
  const r = await exec(a, { command: 'cat', background: true });
  let sent = '';
  for (let i = a.rand.int(1, 4); i > 0; i--) {
    const data = `${a.rand.pick(WORDS)}-${++a.n}\n`.repeat(a.rand.int(1, 50));
    await proc(a, 'write', { sessionId: r.sessionId, data });
    sent += data;
  }
  const end = await proc(a, 'write', { sessionId: r.sessionId, data: '', eof: true });
  same(end.eof, true, 'eof');
  const { output, last } = await pollToEnd(a, r.sessionId);
  same(last.exitCode, 0, 'exit code');
  same(output, sent, 'what cat echoed');
  await forget(a, r.sessionId);
}
