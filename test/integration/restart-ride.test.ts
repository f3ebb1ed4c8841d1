import { readdirSync, readlinkSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { Scoped } from '../helpers/session.js';
import { cliOn, killChildren, spawnCli, waitForOutput } from '../cli/run.js';

/**
 * Clients ride through a planned restart (SPEC §19): the CLI's streams reconnect and go on from
 * the last character they printed, a person sees a pause and not an error. Real daemon, real
 * restarts (`procctl daemon restart`), a counter whose every number must show exactly once.
 */

const pids = new Set<number>();

afterEach(async () => {
  killChildren();
  await stopAllDaemons();
  killLeftovers(pids);
});

/** A counter printing every 10 ms, `n` numbers. */
const counter = (n: number) => `i=0; while [ $i -lt ${n} ]; do echo $i; i=$((i+1)); sleep 0.01; done`;

function expectEveryNumberOnce(output: string, n: number): void {
  const lines = output.split('\n').filter((l) => l !== '');
  for (let i = 0; i < Math.min(n, lines.length); i++) if (lines[i] !== String(i)) throw new Error(`line ${i} is ${JSON.stringify(lines[i])}: a number was lost or doubled`);
  expect(lines.length).toBe(n);
}

function readlinkOr(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

async function planned(d: TestDaemon): Promise<number> {
  const c = await TestClient.connect(d.socket);
  try {
    return (await c.call('daemon.status')).restarts.planned;
  } finally {
    c.close();
  }
}

/** `procctl daemon restart`, and the new image serving. */
async function restart(d: TestDaemon): Promise<void> {
  const before = await planned(d);
  const r = await cliOn(d.socket)(['daemon', 'restart']);
  expect(r.code, r.stderr).toBe(0);
  await waitFor(async () => (await planned(d).catch(() => before)) > before, { what: 'the new image to serve', timeoutMs: 30_000 });
}

describe('the CLI rides through a planned restart', () => {
  it('log -f goes on from the last character it printed: every number once, and the end', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'default');
    const n = 400;
    const job = await s.exec({ command: counter(n), background: true });
    pids.add(job.pid);
    await s.waitOutput(job.sessionId, '\n5\n');
    const follow = spawnCli(['log', job.sessionId, '-f'], { env: { PROCCTL_SOCKET: d.socket } });
    await waitForOutput(follow, '\n30\n');
    await restart(d);
    const r = await follow.exited;
    expect(r.code, r.stderr).toBe(0);
    expectEveryNumberOnce(r.stdout, n);
    expect(r.stderr).not.toMatch(/lost the connection|error/i);
  });

  it('exec in the foreground streams on through two restarts and exits with the command', async () => {
    const d = await startDaemon();
    const n = 500;
    const run = spawnCli(['exec', '--', 'sh', '-c', `${counter(n)}; exit 3`], { env: { PROCCTL_SOCKET: d.socket } });
    await waitForOutput(run, '\n20\n');
    await restart(d);
    await waitForOutput(run, `\n${Math.floor(n / 2)}\n`);
    await restart(d);
    const r = await run.exited;
    expect(r.code, r.stderr).toBe(3);
    expectEveryNumberOnce(r.stdout, n);
  });

  it('events (until none runs) hands over what it missed, and ends when the session ends', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'default');
    const job = await s.exec({ command: 'sleep 6; echo done-after-restart', background: true });
    pids.add(job.pid);
    const events = spawnCli(['events', '--json'], { env: { PROCCTL_SOCKET: d.socket } });
    await waitFor(() => events.stderr().includes('watching events'), { what: 'events to watch' });
    await restart(d);
    const r = await events.exited;
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.filter((e) => e.type === 'output').map((e) => e.data).join('')).toBe('done-after-restart\n');
    expect(lines.filter((e) => e.type === 'exited')).toHaveLength(1);
  });

  it('wait is sent again to the new image with the time it has left', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'default');
    const job = await s.exec({ command: 'sleep 4', background: true });
    pids.add(job.pid);
    const wait = spawnCli(['wait', job.sessionId, '--timeout', '60000'], { env: { PROCCTL_SOCKET: d.socket } });
    // Its request is in flight once it holds a socket (its stdio are pipes).
    await waitFor(() => readdirSync(`/proc/${wait.proc.pid}/fd`).some((fd) => readlinkOr(`/proc/${wait.proc.pid}/fd/${fd}`).startsWith('socket:')), { what: 'wait to connect' });
    await restart(d);
    const r = await wait.exited;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/done/);
  });
});
