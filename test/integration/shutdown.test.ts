import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { childrenOf, killLeftovers, leftovers, spawnProcctld, stopRawDaemons, waitGone } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { Scoped } from '../helpers/session.js';

const GRACE_MS = 500;
/** Anything we started that a failing daemon might leave behind; killed by pid at the end. */
const started = new Set<number>();

afterAll(async () => {
  await stopRawDaemons();
  await stopAllDaemons();
  killLeftovers(started);
});

const childOf = async (s: Scoped, sessionId: string): Promise<number> => {
  await s.waitOutput(sessionId, 'child=');
  const line = (await s.log(sessionId)).output.split('\n').find((l: string) => l.startsWith('child='));
  const pid = Number(line.slice('child='.length));
  started.add(pid);
  return pid;
};

describe('graceful shutdown', () => {
  it('SIGTERM with running sessions (one ignoring TERM) exits 0 within the grace and leaves no process behind', async () => {
    const d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: String(GRACE_MS) } });
    const c = await d.client();
    const other = await d.client();
    const s = new Scoped(c, 'sd');
    const pids: number[] = [];
    const bg = async (command: string) => {
      const r = await s.exec({ command, background: true });
      expect(r.status).toBe('running');
      pids.push(r.pid);
      started.add(r.pid);
      return r;
    };

    await bg('sleep 600');
    const stubborn = await bg('trap "" TERM; echo ready; sleep 600');
    const withChild = await bg('sleep 600 & echo "child=$!"; wait');
    const stubbornChild = await bg('trap "" TERM; sleep 600 & echo "child=$!"; wait');
    await s.waitOutput(stubborn.sessionId, 'ready');
    pids.push(await childOf(s, withChild.sessionId), await childOf(s, stubbornChild.sessionId));

    // A foreground exec still pending on another connection.
    const fg = new Scoped(other, 'sd');
    const pendingFg = fg.request('exec', { command: 'sleep 600', yieldMs: 110_000 });
    const fgSession = await waitFor(async () => (await s.list()).find((x) => x.command === 'sleep 600' && !pids.includes(x.pid)), {
      what: 'the foreground session',
    });
    pids.push(fgSession.pid);
    started.add(fgSession.pid);
    for (const pid of pids) expect(alive(pid), `pid ${pid} before shutdown`).toBe(true);
    // Whatever else the daemon runs of its own (helpers) must go with it too.
    const helpers = childrenOf(d.proc.pid!).filter((pid) => !pids.includes(pid));

    const t0 = Date.now();
    const code = await d.stop();
    const took = Date.now() - t0;
    expect(code).toBe(0);
    expect(took).toBeLessThan(GRACE_MS + 10_000);
    expect(leftovers(pids)).toEqual([]);
    expect(await waitGone(helpers, 5000), 'daemon helper processes after shutdown').toEqual([]);

    // The pending exec got an answer saying why, or its connection was closed.
    const answer = await Promise.race([pendingFg, new Promise<undefined>((r) => other.until(() => other.closed, 10_000).then(() => r(undefined), () => r(undefined)))]);
    if (answer?.result) {
      expect(answer.result.status).toBe('failed');
      expect(answer.result.reason).toBe('shutdown');
    }
    await other.until(() => other.closed, 10_000);
    await expect(TestClient.connect(d.socket)).rejects.toThrow();
  });

  it('while it shuts down, new commands are refused as unavailable', async () => {
    const d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: '3000' } });
    const c = await d.client();
    const s = new Scoped(c, 'closing');
    // A session that ignores SIGTERM holds the shutdown open for the grace.
    const r = await s.exec({ command: 'trap "" TERM; echo ready; sleep 600', background: true });
    started.add(r.pid);
    await s.waitOutput(r.sessionId, 'ready');
    const exited = new Promise<number | null>((res) => d.proc.once('exit', (code) => res(code)));
    d.proc.kill('SIGTERM');
    await waitFor(async () => (await c.call('daemon.status')).closing === true, { what: 'the daemon to report closing' });
    const e = await s.error('exec', { command: 'echo too-late' });
    expect(e.data.kind).toBe('unavailable');
    expect(await exited).toBe(0);
    expect(leftovers([r.pid])).toEqual([]);
    await d.stop();
  });

  it('SIGINT shuts down the same way', async () => {
    const d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: String(GRACE_MS) } });
    const c = await d.client();
    const r = await c.exec({ command: 'sleep 600', background: true });
    started.add(r.pid);
    const exited = new Promise<number | null>((res) => d.proc.once('exit', (code) => res(code)));
    d.proc.kill('SIGINT');
    expect(await exited).toBe(0);
    expect(leftovers([r.pid])).toEqual([]);
    await d.stop();
  });

  it('also terminates a descendant that left the session process group', async () => {
    const d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: String(GRACE_MS) } });
    const c = await d.client();
    const s = new Scoped(c, 'esc');
    const r = await s.exec({ command: 'setsid sleep 600 & echo "child=$!"; sleep 600', background: true });
    started.add(r.pid);
    const escaped = await childOf(s, r.sessionId);
    await waitFor(() => alive(escaped), { what: 'the escaped process' });
    expect(await d.stop()).toBe(0);
    expect(await waitGone([r.pid, escaped], 3000)).toEqual([]);
  });

  it('SIGTERM the moment the socket accepts connections is still a graceful exit 0', async () => {
    // No requests first: the daemon must be ready for SIGTERM by the time anyone can connect.
    for (let i = 0; i < 3; i++) {
      const dir = mkdtempSync(join(tmpdir(), 'procctl-early-'));
      const socket = join(dir, 'procctl.sock');
      const d = spawnProcctld(['--socket', socket], { XDG_CONFIG_HOME: join(dir, 'config'), PROCCTL_STATE_DIR: join(dir, 'state') });
      try {
        await waitFor(
          async () => {
            if (d.proc.exitCode !== null) throw new Error(`procctld exited early: ${d.stderr()}`);
            try {
              (await TestClient.connect(socket)).close();
              return true;
            } catch {
              return false;
            }
          },
          { everyMs: 2, what: 'procctld to accept' },
        );
        d.proc.kill('SIGTERM');
        expect(await d.exited, `attempt ${i + 1}: ${d.stderr()}`).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
  });
});
