import { describe, expect, it } from 'vitest';
import { type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scopes, type Scoped, sharedDaemon } from '../helpers/session.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

  // Terminal sessions here sit in read on purpose; waiting-for-input detection would turn them into
  // waiting_input, so it is off (interrupts.test.ts covers it, on terminals too).
sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000', PROCCTL_INTERRUPT: 'false' } }, (x) => ({ d, c, scopes } = x));

/** Printed after the part of a command a test looks at; the session then idles until killed. */
const DONE = '__done__';

async function ptyBg(s: Scoped, command: string): Promise<any> {
  const r = await s.exec({ command, pty: true, background: true });
  expect(r.status).toBe('running');
  expect(r.warnings).toBeUndefined();
  scopes.track(r.pid);
  return r;
}

/** Drain a session's output with poll until `marker` has come (the session may still run). */
async function drainUntil(s: Scoped, sessionId: string, marker: string, timeoutMs = 20_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let output = '';
  while (!output.includes(marker)) {
    if (Date.now() > deadline) throw new Error(`no "${marker}" in the output of ${sessionId} within ${timeoutMs} ms: ${JSON.stringify(output.slice(-300))}`);
    const p = await s.process({ action: 'poll', sessionId, timeout: 1000 });
    output += p.output;
    if (p.status !== 'running' && !output.includes(marker)) throw new Error(`session ${sessionId} ended (${p.status}) before "${marker}": ${JSON.stringify(output.slice(-300))}`);
  }
  return output;
}

/**
 * Run `command` on a terminal and return what it printed, read while the session still runs:
 * the test then kills it. (What a terminal session prints just before it exits can be lost;
 * that is tested on its own below, and kept out of the tests of everything else.)
 */
async function ptyOutput(s: Scoped, command: string): Promise<string> {
  const r = await ptyBg(s, `${command}; printf '%s\\n' '${DONE}'; exec sleep 60`);
  return finish(s, r.sessionId);
}

/** Everything before the DONE marker; the session is killed after. */
async function finish(s: Scoped, sessionId: string): Promise<string> {
  const out = await drainUntil(s, sessionId, DONE);
  await s.process({ action: 'kill', sessionId, graceMs: 200 });
  return out.slice(0, out.indexOf(DONE));
}

/**
 * A terminal session that switches to raw mode, says `go`, then prints the next `count` bytes it
 * reads as hex: what a key press really sends, with no line discipline in between.
 */
async function rawReader(s: Scoped, count: number, before = ''): Promise<any> {
  const r = await ptyBg(s, `${before}stty raw -echo; printf 'go\\n'; dd bs=1 count=${count} 2>/dev/null | od -An -tx1 -v; printf '%s\\n' '${DONE}'; exec sleep 60`);
  await s.waitOutput(r.sessionId, 'go');
  return r;
}

/** The bytes a rawReader read, as hex strings. */
async function bytesRead(s: Scoped, sessionId: string): Promise<string[]> {
  const output = await finish(s, sessionId);
  return output.slice(output.indexOf('go') + 2).trim().split(/\s+/).filter(Boolean);
}

/** A session that waits for a line on its terminal, then echoes it back in brackets. */
async function lineReader(s: Scoped, after = ''): Promise<any> {
  const r = await ptyBg(s, `printf 'wait\\n'; read line; echo "got[$line]"; ${after}printf '%s\\n' '${DONE}'; exec sleep 60`);
  await s.waitOutput(r.sessionId, 'wait');
  return r;
}

const hexOf = (text: string) => [...Buffer.from(text, 'latin1')].map((b) => b.toString(16).padStart(2, '0'));

describe('a terminal session', () => {
  it('has a terminal of 120x30 as its stdin', async () => {
    const s = scopes.next('tty');
    expect(await ptyOutput(s, 'tty; stty size')).toMatch(/^\/dev\/pts\/\d+\r\n30 120\r\n$/);
    // A foreground exec gets one too.
    const r = await s.exec({ command: 'test -t 0 && test -t 1 && test -t 2', pty: true });
    expect(r).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(r.warnings).toBeUndefined();
  });

  it('merges stdout and stderr into one stream, in the order written', async () => {
    const s = scopes.next('merge');
    const sub = await s.request('subscribe', { events: ['output'] });
    expect(sub.error).toBeUndefined();
    const r = await ptyBg(s, `echo one; echo two >&2; echo three; printf '%s\\n' '${DONE}'; exec sleep 60`);
    const out = await finish(s, r.sessionId);
    expect(out).toBe('one\r\ntwo\r\nthree\r\n');
    await c.until(() => outputEvents(r.sessionId).join('').includes('three'));
    const streams = new Set(c.notifications.filter((n) => n.params?.sessionId === r.sessionId && n.params.type === 'output').map((n) => n.params.stream));
    expect([...streams]).toEqual(['stdout']);
    await s.request('unsubscribe', { subscription: sub.result.subscription });
  });

  it('write with eof sends ^D, which ends cat', async () => {
    const s = scopes.next('eof');
    const r = await ptyBg(s, `cat; echo "rc=$?"; printf '%s\\n' '${DONE}'; exec sleep 60`);
    const w = await s.process({ action: 'write', sessionId: r.sessionId, data: 'hello\n', eof: true });
    expect(w).toMatchObject({ status: 'running', bytes: 6, eof: true });
    // The terminal echoes the line, cat prints it, and ends at the ^D.
    expect(await finish(s, r.sessionId)).toBe('hello\r\nhello\r\nrc=0\r\n');
  });

  it('a leader that closes the terminal just before it exits completes normally', async () => {
    // `cat` alone is exec'd by the shell, so it leads the session; it closes fds 0-2 before it
    // exits. Seen repeatedly, because the failure (a SIGHUP in that window) is a race.
    const s = scopes.next('eofleader');
    const outcomes: string[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await ptyBg(s, 'cat');
      await s.process({ action: 'write', sessionId: r.sessionId, data: 'hello\n', eof: true });
      const { last } = await s.pollUntilEnded(r.sessionId);
      outcomes.push(`${last.status} code=${last.exitCode} signal=${last.signal}`);
    }
    expect(outcomes.filter((o) => o !== 'completed code=0 signal=null')).toEqual([]);
  });

  it('captures everything printed before the exit, to the last byte', async () => {
    // ~130 kB through the terminal, then a marker, then the exit; the session must not end
    // without the marker. Repeated, because losing the tail of a terminal's output at exit is a race.
    const s = scopes.next('tail');
    const endings: string[] = [];
    for (let i = 0; i < 20; i++) {
      const r = await s.exec({ command: 'seq 1 20000; echo END', pty: true, yieldMs: 30_000 });
      expect(r.status).toBe('completed');
      if (!r.output.endsWith('20000\r\nEND\r\n')) endings.push(JSON.stringify(r.output.slice(-20)));
      await s.process({ action: 'clear', sessionId: r.sessionId });
    }
    expect(endings).toEqual([]);
  });

  it('resize changes what the program sees as the terminal size', async () => {
    const s = scopes.next('resize');
    const r = await ptyBg(s, `printf 'wait\\n'; read x; stty size; printf '%s\\n' '${DONE}'; exec sleep 60`);
    await s.waitOutput(r.sessionId, 'wait');
    const z = await s.process({ action: 'resize', sessionId: r.sessionId, cols: 100, rows: 40 });
    expect(z).toMatchObject({ sessionId: r.sessionId, cols: 100, rows: 40 });
    await s.process({ action: 'submit', sessionId: r.sessionId });
    expect(await finish(s, r.sessionId)).toContain('\r\n40 100\r\n');
  });
});

describe('send-keys', () => {
  it('Enter ends a line; with literal, names are typed as text', async () => {
    const s = scopes.next('enter');
    const r = await lineReader(s);
    const a = await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['Enter'], literal: false });
    expect(a).toMatchObject({ status: 'running', bytes: 1 });
    expect(await finish(s, r.sessionId)).toContain('got[]');

    const r2 = await lineReader(s);
    await s.process({ action: 'send-keys', sessionId: r2.sessionId, keys: ['Up Enter'], literal: true });
    await s.process({ action: 'send-keys', sessionId: r2.sessionId, keys: ['Enter'] });
    expect(await finish(s, r2.sessionId)).toContain('got[Up Enter]');
  });

  it('C-c interrupts a foreground sleep the way a terminal does', async () => {
    const s = scopes.next('ctrlc');
    const r = await ptyBg(s, "printf 'wait\\n'; sleep 30");
    await s.waitOutput(r.sessionId, 'wait');
    await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['C-c'] });
    const { last } = await s.pollUntilEnded(r.sessionId, 10_000);
    expect(last).toMatchObject({ status: 'failed', signal: 'SIGINT', reason: 'signal' });
  });

  it('Up sends ESC [ A normally', async () => {
    const s = scopes.next('up');
    const r = await rawReader(s, 3);
    await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['Up'] });
    expect(await bytesRead(s, r.sessionId)).toEqual(['1b', '5b', '41']);
  });

  it('Up sends ESC O A once the application asked for application cursor keys', async () => {
    const s = scopes.next('upapp');
    const r = await rawReader(s, 3, "printf '\\033[?1h'; ");
    await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['Up'] });
    expect(await bytesRead(s, r.sessionId)).toEqual(['1b', '4f', '41']);
  });

  it('sends several keys and hex bytes in order', async () => {
    const s = scopes.next('hex');
    const r = await rawReader(s, 6);
    const a = await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['C-a', 'F1', 'Tab'], hex: ['0x7e'] });
    expect(a.bytes).toBe(6);
    expect(await bytesRead(s, r.sessionId)).toEqual(['01', '1b', '4f', '50', '09', '7e']);
  });

  it('hex alone sends raw bytes', async () => {
    const s = scopes.next('hexonly');
    const r = await lineReader(s);
    await s.process({ action: 'send-keys', sessionId: r.sessionId, hex: ['68 69', '0d'] });
    expect(await finish(s, r.sessionId)).toContain('got[hi]');
  });

  it('an unknown key is invalid params naming the key, and nothing is sent', async () => {
    const s = scopes.next('badkey');
    const r = await rawReader(s, 1);
    const err = await s.error('process', { action: 'send-keys', sessionId: r.sessionId, keys: ['a', 'Bogus'] });
    expect(err.data?.kind).toBe('invalid');
    expect(err.message).toContain('Bogus');
    // The `a` before the bad name must not have gone out: the next byte read is the `b`.
    await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['b'] });
    expect(await bytesRead(s, r.sessionId)).toEqual(['62']);
    // SPEC §4: params the daemon refuses as malformed answer -32602 with the field's path.
    expect(err.code).toBe(-32602);
    expect(err.data?.path).toEqual(['keys']);
  });

  it('send-keys, paste and resize to a session on pipes are a conflict', async () => {
    const s = scopes.next('pipes');
    const r = await s.exec({ command: 'sleep 30', background: true });
    scopes.track(r.pid);
    for (const p of [
      { action: 'send-keys', keys: ['Enter'] },
      { action: 'paste', text: 'x' },
      { action: 'resize', cols: 80, rows: 24 },
    ]) {
      const err = await s.error('process', { ...p, sessionId: r.sessionId });
      expect(err.data?.kind, p.action).toBe('conflict');
    }
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});

describe('submit and paste', () => {
  it('submit sends a carriage return that ends the line', async () => {
    const s = scopes.next('submit');
    const r = await lineReader(s);
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'xyz' });
    await s.process({ action: 'submit', sessionId: r.sessionId });
    expect(await finish(s, r.sessionId)).toContain('got[xyz]');
  });

  it('submit on a pipe session sends a newline', async () => {
    const s = scopes.next('submitpipe');
    const r = await s.exec({ command: `read line; echo "got[$line]"`, background: true });
    scopes.track(r.pid);
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'abc' });
    await s.process({ action: 'submit', sessionId: r.sessionId });
    const { output } = await s.pollUntilEnded(r.sessionId);
    expect(output).toBe('got[abc]\n');
  });

  it('paste with bracketed:true wraps the text in ESC [200~ ... ESC [201~', async () => {
    const s = scopes.next('paste');
    const r = await rawReader(s, 14);
    const p = await s.process({ action: 'paste', sessionId: r.sessionId, text: 'hi', bracketed: true });
    expect(p.bytes).toBe(14);
    expect(await bytesRead(s, r.sessionId)).toEqual(hexOf('\x1b[200~hi\x1b[201~'));
  });

  it('paste without bracketed follows the mode the application set', async () => {
    const s = scopes.next('pastemode');
    const plain = await rawReader(s, 2);
    await s.process({ action: 'paste', sessionId: plain.sessionId, text: 'hi' });
    expect(await bytesRead(s, plain.sessionId)).toEqual(hexOf('hi'));

    const asked = await rawReader(s, 14, "printf '\\033[?2004h'; ");
    await s.process({ action: 'paste', sessionId: asked.sessionId, text: 'hi' });
    expect(await bytesRead(s, asked.sessionId)).toEqual(hexOf('\x1b[200~hi\x1b[201~'));
  });
});

function outputEvents(sessionId: string): string[] {
  return c.notifications.filter((n) => n.params?.sessionId === sessionId && n.params.type === 'output').map((n) => n.params.data);
}
