import { describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes, within, sharedDaemon } from '../helpers/session.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

/** A prompt no built-in pattern knows, and that does not end like a question (`:`, `?`, `>`). */
const CUSTOM_PROMPT = 'say the magic word please';

sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' }, config: { interrupt: { promptPatterns: ['magic word'] } } }, (x) => ({ d, c, scopes } = x));

/** Run a command that should stop at a question; the exec must come back waiting_input. */
async function asks(s: Scoped, command: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await s.exec({ command, yieldMs: 30_000, ...extra });
  scopes.track(r.pid);
  expect(r.status, JSON.stringify(r).slice(0, 400)).toBe('waiting_input');
  expect(r.interrupt).toBeDefined();
  return r;
}

/** Answer, then drain until the session ends; returns the last poll and all output. */
async function answer(s: Scoped, sessionId: string, input: Record<string, unknown>): Promise<{ last: any; output: string }> {
  const res = await s.process({ action: 'resume', sessionId, input });
  expect(res).toMatchObject({ sessionId });
  return s.pollUntilEnded(sessionId);
}

/**
 * On a terminal: answer, let the command ask a last `Done?` (so what it printed is read while it
 * still runs — the very end of a terminal session's output can be lost at exit, which
 * pty.test.ts tests on its own), answer that with end of input, and run it to completion.
 */
async function answerOnTerminal(s: Scoped, sessionId: string, input: Record<string, unknown>): Promise<{ output: string; reply: any; last: any }> {
  const reply = await s.process({ action: 'resume', sessionId, input });
  let output = '';
  const next = await waitFor(
    async () => {
      const p = await s.process({ action: 'poll', sessionId, timeout: 1000 });
      output += p.output;
      if (p.status !== 'running' && p.status !== 'waiting_input') throw new Error(`session ended (${p.status}) before its last question: ${JSON.stringify(output)}`);
      return p.status === 'waiting_input' ? p : undefined;
    },
    { what: 'the last question' },
  );
  expect(next.interrupt.reason).toBe('Done?');
  const { last, output: rest } = await answer(s, sessionId, { eof: true });
  return { output: output + rest, reply, last };
}

/** The last question a terminal command asks in these tests (answered with end of input). */
const LAST_QUESTION = "read -p 'Done? ' b || true";

describe('commands that ask', () => {
  it("read -p on a pipe prints no prompt: the text says so and suggests a terminal", async () => {
    const s = scopes.next('noprompt');
    const r = await asks(s, `bash -c "read -p 'Continue? [y/N] ' a; echo got=\\$a"`);
    expect(r.interrupt.reason).toBe('');
    expect(r.text).toContain('It printed no prompt');
    expect(r.text).toContain('pty:true');
    await answer(s, r.sessionId, { eof: true });
  });

  it('read -p with a [y/N] prompt on a terminal: a confirm', async () => {
    const s = scopes.next('confirm');
    const r = await asks(s, `read -p 'Continue? [y/N] ' a; echo got=$a; ${LAST_QUESTION}`, { pty: true });
    expect(r.interrupt).toMatchObject({ kind: 'confirm', reason: 'Continue? [y/N]' });
    expect(r.text).not.toContain('no prompt line');
    expect(r.interrupt.fields).toEqual([{ name: 'confirm', type: 'confirm', label: 'Continue? [y/N]', required: true }]);
    const { output, last } = await answerOnTerminal(s, r.sessionId, { confirm: true });
    expect(last).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(output).toContain('Continue? [y/N] y\r\ngot=y\r\n');
  });

  it('read -p on pipes (bash prints no prompt there): still found, as text', async () => {
    const s = scopes.next('pipes');
    const r = await asks(s, "echo working; read -p 'Continue? [y/N] ' a; echo got=$a");
    expect(r.interrupt.kind).toBe('text');
    // No prompt line to show: the text says how to see the question.
    expect(r.text).toContain('It printed no prompt line');
    expect(r.text).toContain('run it again with pty:true');
    const { last, output } = await answer(s, r.sessionId, { text: 'yes please' });
    expect(last.status).toBe('completed');
    expect(output).toBe('working\ngot=yes please\n');
  });

  it('read -s for a password on a terminal: a secret that never shows in the output', async () => {
    const s = scopes.next('secret');
    const r = await asks(s, `read -s -p 'Password: ' p; echo; echo len=\${#p}; ${LAST_QUESTION}`, { pty: true });
    expect(r.interrupt).toMatchObject({ kind: 'secret', reason: 'Password:' });
    expect(r.interrupt.fields[0]).toMatchObject({ name: 'secret', type: 'secret' });
    const { output, reply, last } = await answerOnTerminal(s, r.sessionId, { text: 'hunter2-s3cret' });
    expect(last).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(reply.text).not.toContain('hunter2');
    expect(output).toContain('len=14');
    const past = (await s.list()).find((x) => x.sessionId === r.sessionId).pastInterrupts;
    expect(JSON.stringify(past)).not.toContain('hunter2');
    expect(output).not.toContain('hunter2');
    const log = await s.log(r.sessionId, { offset: 0 });
    expect(log.output).not.toContain('hunter2');
  });

  it("python input('name: '): text, with the prompt as the reason", async () => {
    const s = scopes.next('python');
    const r = await asks(s, `python3 -c 'n=input("name: "); print("hi", n)'`);
    expect(r.interrupt).toMatchObject({ kind: 'text', reason: 'name:' });
    expect(r.interrupt.fields[0]).toMatchObject({ name: 'text', type: 'text', label: 'name:', required: true });
    const { last, output } = await answer(s, r.sessionId, { text: 'Ada' });
    expect(last.status).toBe('completed');
    expect(output).toBe('name: hi Ada\n');
  });

  it('a bash select menu: a select with its options; an answer by label sends the number', async () => {
    const s = scopes.next('select');
    const r = await asks(s, "PS3='Pick one: '; select x in alpha beta gamma; do echo chose=$x; break; done");
    expect(r.interrupt).toMatchObject({ kind: 'select', reason: 'Pick one:' });
    expect(r.interrupt.fields[0].options).toEqual([
      { value: '1', label: 'alpha' },
      { value: '2', label: 'beta' },
      { value: '3', label: 'gamma' },
    ]);
    const { last, output } = await answer(s, r.sessionId, { text: 'beta' });
    expect(last.status).toBe('completed');
    expect(output).toContain('chose=beta');
  });

  it('cat waiting on stdin: resume with eof ends it', async () => {
    const s = scopes.next('cat');
    const r = await asks(s, 'cat');
    expect(r.interrupt).toMatchObject({ kind: 'text', reason: '' });
    expect(r.interrupt.fields[0].label).toBe('The command is waiting for input');
    const { last, output } = await answer(s, r.sessionId, { eof: true });
    expect(last).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(output).toBe('');
  });

  it('a prompt without a trailing newline', async () => {
    const s = scopes.next('nonl');
    const r = await asks(s, "printf 'ready> '; read y; echo y=$y");
    expect(r.interrupt).toMatchObject({ kind: 'text', reason: 'ready>' });
    expect(r.text).not.toContain('pty:true');
    const { output } = await answer(s, r.sessionId, { text: 'go' });
    expect(output).toBe('ready> y=go\n');
  });

  it('sleep 1; read x: flagged only once the read has started', async () => {
    const s = scopes.next('late');
    const pending = s.exec({ command: 'sleep 1; read x; echo x=$x', yieldMs: 30_000 });
    const session = await waitFor(async () => (await s.list())[0], { what: 'the session to be listed' });
    scopes.track(session.pid);
    const startedAt = Date.parse(session.startedAt);
    // Before the read (the first half second of the sleep), nothing is waiting.
    const early = await s.process({ action: 'poll', sessionId: session.sessionId });
    if (Date.now() - startedAt < 900) expect(early.status).toBe('running');
    const r = await pending;
    expect(r.status).toBe('waiting_input');
    // The read began after the sleep: the interrupt cannot predate it.
    expect(Date.parse(r.interrupt.createdAt) - startedAt).toBeGreaterThanOrEqual(1000);
    const { output } = await answer(s, r.sessionId, { text: 'late' });
    expect(output).toBe('x=late\n');
  });

  it('a custom prompt pattern from the config makes a select/poll reader count as waiting', async () => {
    // A process blocked in select() on its stdin is waiting only if its last line looks like a
    // prompt; this line matches nothing built in, only interrupt.promptPatterns.
    const s = scopes.next('custom');
    const r = await asks(s, selectReader(CUSTOM_PROMPT));
    expect(r.interrupt).toMatchObject({ kind: 'text', reason: CUSTOM_PROMPT });
    const { last, output } = await answer(s, r.sessionId, { text: 'xyzzy' });
    expect(last.status).toBe('completed');
    expect(output).toBe(`${CUSTOM_PROMPT}\ngot xyzzy\n`);
  });
});

/** python blocked in select() on stdin after printing `line`, then echoing what it read. */
function selectReader(line: string): string {
  return `python3 -c 'import sys, select; print("${line}", flush=True); select.select([sys.stdin], [], []); print("got", sys.stdin.readline().strip())'`;
}

describe('sessions that are not waiting for input', () => {
  it('sleep, a busy loop, a FIFO reader and a select reader without a prompt stay running', async () => {
    const off = await startDaemon({ env: { PROCCTL_INTERRUPT: 'false', PROCCTL_KILL_GRACE_MS: '1000' } });
    const offClient = await off.client();
    try {
      const s = scopes.next('neg');
      const offScope = new Scoped(offClient, 'off');
      const started = await Promise.all([
        s.exec({ command: 'sleep 5', background: true }),
        s.exec({ command: 'while :; do :; done', background: true }),
        s.exec({ command: 'cd "$PROCCTL_TMPDIR" && mkfifo f && (sleep 4 > f &) && read z < f; echo z-done', background: true }),
        s.exec({ command: selectReader('just some progress output'), background: true }),
        // With detection off, even a plain read on stdin is never flagged.
        offScope.exec({ command: 'read x; echo x=$x', background: true }),
      ]);
      for (const r of started) scopes.track(r.pid);
      await s.request('subscribe', { events: ['waiting_input'] });
      const deadline = Date.now() + 3000;
      while (Date.now() < deadline) {
        const lists = [...(await s.list()), ...(await offScope.list())];
        for (const r of started) {
          const rec = lists.find((x) => x.sessionId === r.sessionId);
          expect(rec.interrupt, rec.command).toBeUndefined();
          // sleep 5 may end normally late in the window; it must not have been waiting.
          expect(['running', 'completed'], rec.command).toContain(rec.status);
        }
        await new Promise((res) => setTimeout(res, 250));
      }
      expect(c.notifications.filter((n) => n.params?.type === 'waiting_input' && started.some((r) => r.sessionId === n.params.sessionId))).toEqual([]);
      const offPoll = await offScope.process({ action: 'poll', sessionId: started[4].sessionId, timeout: 100 });
      expect(offPoll.status).toBe('running');
      await s.process({ action: 'kill', all: true, graceMs: 500 });
      await offScope.process({ action: 'kill', all: true, graceMs: 500 });
    } finally {
      offClient.close();
      await off.stop();
    }
  });
});

describe('the interrupt protocol', () => {
  it('exec answers waiting_input with the whole interrupt, and list and poll show it', async () => {
    const s = scopes.next('shape');
    const r = await asks(s, "printf 'Proceed? (yes/no) '; read a; echo a=$a");
    const i = r.interrupt;
    expect(Object.keys(i).sort()).toEqual(['createdAt', 'expiresAt', 'fields', 'id', 'kind', 'reason']);
    expect(i).toMatchObject({ kind: 'confirm', reason: 'Proceed? (yes/no)' });
    expect(i.id).toMatch(/\S/);
    // Default interrupt.timeoutSeconds: 300.
    expect(Date.parse(i.expiresAt) - Date.parse(i.createdAt)).toBe(300_000);
    expect(r.tail).toContain('Proceed? (yes/no)');
    expect(r.text).toContain('resume');

    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.status).toBe('waiting_input');
    expect(listed.interrupt).toEqual(i);

    // A poll with a long timeout answers at once while an interrupt is pending.
    const polled = await within(s.process({ action: 'poll', sessionId: r.sessionId, timeout: 60_000 }), 10_000, 'poll on a waiting session');
    expect(polled.status).toBe('waiting_input');
    expect(polled.interrupt).toEqual(i);

    const { output } = await answer(s, r.sessionId, { confirm: false });
    expect(output).toContain('a=n');
  });

  it('a pending poll returns when the interrupt arrives, and a subscriber gets a waiting_input event', async () => {
    const s = scopes.next('event');
    const sub = await s.request('subscribe', { events: ['waiting_input'] });
    expect(sub.error).toBeUndefined();
    const r = await s.exec({ command: "sleep 0.5; printf 'Are you sure? '; read a; echo a=$a", background: true });
    scopes.track(r.pid);
    const polled = await s.process({ action: 'poll', sessionId: r.sessionId, timeout: 30_000 });
    const p2 = polled.status === 'waiting_input' ? polled : await s.process({ action: 'poll', sessionId: r.sessionId, timeout: 30_000 });
    expect(p2.status).toBe('waiting_input');
    await c.until(() => c.notifications.some((n) => n.params?.type === 'waiting_input' && n.params.sessionId === r.sessionId));
    const ev = c.notifications.find((n) => n.params?.type === 'waiting_input' && n.params.sessionId === r.sessionId).params;
    expect(ev.interrupt).toEqual(p2.interrupt);
    expect(ev.interrupt.kind).toBe('confirm');
    const { output } = await answer(s, r.sessionId, { confirm: true });
    expect(output).toContain('a=y');
  });

  it('an interrupt is answered once: a second resume is a conflict', async () => {
    const s = scopes.next('twice');
    const r = await asks(s, "printf 'Continue? [y/N] '; read a; sleep 0.5; echo a=$a");
    await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
    const err = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: false } });
    expect(err.data?.kind).toBe('conflict');
    const { output } = await s.pollUntilEnded(r.sessionId);
    expect(output).toContain('a=y');
    const rec = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(rec.pastInterrupts.map((p: any) => p.outcome)).toEqual(['answered']);
  });

  it('resume with nothing pending is a conflict', async () => {
    const s = scopes.next('nothing');
    const r = await s.exec({ command: 'sleep 30', background: true });
    scopes.track(r.pid);
    const err = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { text: 'x' } });
    expect(err.data?.kind).toBe('conflict');
    const done = await s.exec({ command: 'true' });
    const err2 = await s.error('process', { action: 'resume', sessionId: done.sessionId, input: { eof: true } });
    expect(err2.data?.kind).toBe('conflict');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('an unanswered interrupt expires: stdin is closed and the expiry recorded', async () => {
    const fast = await startDaemon({ config: { interrupt: { timeoutSeconds: 1 } } });
    const fc = await fast.client();
    try {
      const s = new Scoped(fc, 'expiry');
      const r = await s.exec({ command: 'read x; echo "rc=$?"', yieldMs: 30_000 });
      scopes.track(r.pid);
      expect(r.status).toBe('waiting_input');
      expect(Date.parse(r.interrupt.expiresAt) - Date.parse(r.interrupt.createdAt)).toBe(1000);
      // Polls answer at once while the interrupt is pending; keep draining until the session ends.
      let output = '';
      const last = await waitFor(
        async () => {
          const p = await s.process({ action: 'poll', sessionId: r.sessionId, timeout: 1000 });
          output += p.output;
          return p.status === 'running' || p.status === 'waiting_input' ? undefined : p;
        },
        { everyMs: 100, what: 'the session to end after the expiry' },
      );
      expect(last).toMatchObject({ status: 'completed', exitCode: 0 });
      expect(output).toBe('rc=1\n');
      const rec = (await s.list()).find((x) => x.sessionId === r.sessionId);
      expect(rec.interrupt).toBeUndefined();
      expect(rec.pastInterrupts).toHaveLength(1);
      expect(rec.pastInterrupts[0]).toMatchObject({ id: r.interrupt.id, outcome: 'expired' });
      const err = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { text: 'late' } });
      expect(err.data?.kind).toBe('conflict');
    } finally {
      fc.close();
      await fast.stop();
    }
  });
});
