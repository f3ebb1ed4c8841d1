import pty, { type IPty } from '@lydell/node-pty';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { PROCCTL, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { cli, killChildren } from './run.js';

let d: TestDaemon;
let c: TestClient;
const terminals = new Set<IPty>();

beforeAll(async () => {
  d = await startDaemon();
  c = await d.client();
});
afterEach(() => {
  killChildren();
  for (const t of terminals) {
    try {
      process.kill(t.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  terminals.clear();
});
afterAll(async () => {
  c.close();
  await stopAllDaemons();
});

interface Terminal {
  screen: () => string;
  write: (data: string) => void;
  exited: Promise<number>;
}

/** Run `procctl ARGS` in a pseudo-terminal of its own, as a person at a terminal would. */
function inTerminal(args: string[]): Terminal {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('PROCCTL_')) env[k] = v;
  const t = pty.spawn(process.execPath, [PROCCTL, '--socket', d.socket, ...args], { cols: 100, rows: 30, env });
  terminals.add(t);
  let screen = '';
  t.onData((data) => (screen += data));
  const exited = new Promise<number>((resolve) =>
    t.onExit(({ exitCode }) => {
      terminals.delete(t);
      resolve(exitCode);
    }),
  );
  return { screen: () => screen, write: (data) => t.write(data), exited };
}

const seen = (t: Terminal, pattern: RegExp | string, what = String(pattern)) =>
  waitFor(() => (typeof pattern === 'string' ? t.screen().includes(pattern) : pattern.test(t.screen())), { what: `the terminal to show ${what}` });

async function statusOf(id: string): Promise<string> {
  const { sessions } = await c.process({ action: 'list' });
  return sessions.find((s: any) => s.sessionId === id).status;
}

describe('procctl attach', () => {
  it('shows recent output, types into the session, and detaches on Ctrl-] leaving it running', async () => {
    const { sessionId: id } = await c.exec({ command: 'echo earlier-line; cat', pty: true, background: true });
    await waitFor(async () => (await c.process({ action: 'log', sessionId: id })).output.includes('earlier-line'), { what: 'the first output' });
    const t = inTerminal(['attach', id]);
    await seen(t, 'press Ctrl-] to detach');
    expect(t.screen()).toContain('earlier-line');
    const before = t.screen().length;
    t.write('abc\r');
    // The terminal is raw, so the echo and cat's copy both come from the session.
    await waitFor(() => /abc\r*\n[^]*abc/.test(t.screen().slice(before)), { what: 'the session to echo abc' });
    t.write('\x1d');
    expect(await t.exited).toBe(0);
    // node-pty may report the exit before the last output: wait for it.
    await seen(t, `[detached from ${id}; it keeps running]`);
    expect(await statusOf(id)).toBe('running');
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });

  it('exits with the end line when the session ends', async () => {
    const { sessionId: id } = await c.exec({ command: 'cat', pty: true, background: true });
    const t = inTerminal(['attach', id]);
    await seen(t, 'press Ctrl-] to detach');
    t.write('\x04');
    expect(await t.exited).toBe(0);
    await seen(t, `[session ${id} completed (exit code 0)]`);
  });

  it('refuses a session without a terminal, and a stdin that is not a terminal', async () => {
    const { sessionId: id } = await c.exec({ command: 'sleep 30', background: true });
    const t = inTerminal(['attach', id]);
    expect(await t.exited).toBe(2);
    await seen(t, 'does not run under a terminal');
    const piped = await cli(['--socket', d.socket, 'attach', id]);
    expect(piped.code).toBe(2);
    expect(piped.stderr).toContain('stdin is not a terminal');
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });
});

describe('procctl exec at a terminal', () => {
  it('asks the question a command waits on, and sends the answer', async () => {
    const t = inTerminal(['exec', '--', "printf 'Continue? [y/N] '; read a; echo got=$a"]);
    await seen(t, 'answer (y/n');
    expect(t.screen()).toContain('waiting for input: Continue? [y/N]');
    t.write('maybe\r');
    await seen(t, /maybe\r*\nanswer \(y\/n/, 'the question again');
    t.write('y\r');
    expect(await t.exited).toBe(0);
    await seen(t, 'got=y');
  });
});
