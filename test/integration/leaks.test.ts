import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { diagnose, execAndClear, runMany, scratchDirs, stateFiles, type Diagnostics } from '../helpers/leaks.js';
import type { TestClient } from '../helpers/rpc.js';

afterAll(stopAllDaemons);

/** Nothing of a forgotten session may remain: compare with what the daemon held before. */
async function expectNothingHeld(d: TestDaemon, c: TestClient, before: Diagnostics): Promise<Diagnostics> {
  expect((await c.process({ action: 'list' })).sessions).toEqual([]);
  const KINDS = ['Timeout', 'PipeWrap', 'TTYWrap', 'ProcessWrap'];
  const settled = (now: Diagnostics) =>
    now.fds <= before.fds &&
    now.objects.Session === 0 &&
    KINDS.every((k) => (now.resources[k] ?? 0) <= (before.resources[k] ?? 0)) &&
    // A record waiting for its turn when its session was forgotten is never written.
    stateFiles(d.dir).length === 0;
  // Handles close, timers fire and late record writes land a moment after a session ends: wait for that, then check it all.
  let after = await diagnose(c);
  await waitFor(async () => settled((after = await diagnose(c))), { what: 'descriptors, handles and timers back to where they were', timeoutMs: 30_000 }).catch(
    () => undefined,
  );
  expect(after.fds).toBeLessThanOrEqual(before.fds);
  expect(after.objects).toMatchObject({ Session: 0, SessionOutput: 0, Spool: 0 });
  expect(after.objects.Socket).toBeLessThanOrEqual(before.objects.Socket);
  for (const kind of KINDS) expect(after.resources[kind] ?? 0, kind).toBeLessThanOrEqual(before.resources[kind] ?? 0);
  expect(stateFiles(d.dir)).toEqual([]);
  return after;
}

describe('a forgotten session leaves nothing behind', () => {
  // Thousands of processes: at load 20 on a VM whose host takes back its free pages (a fresh page 70-100 µs, docs/benchmarks.md) one run took 170 s alone and over 300 s beside a bench.
  it('after thousands of sessions on pipes, ptys, stdin null, killed, timed out, replaced and removed', { timeout: 600_000 }, async () => {
    const d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: '2000' } });
    const c = await d.client();
    // Warm up: modules load, spare scratch directories are made, the terminal library is opened.
    await runMany(20, 4, async (i) => void (await execAndClear(c, { command: 'true', pty: i % 2 === 0 })));
    // A first kill opens the event loop's one inotify descriptor (the wait for a cgroup to empty watches cgroup.events):
    // its job ignores the stop signal, so the kill must wait for the cgroup whatever the machine's load.
    const first = await c.exec({ command: "trap '' TERM; echo ready; sleep 30", background: true });
    await waitFor(async () => (await c.process({ action: 'log', sessionId: first.sessionId })).output.includes('ready') || undefined, { what: 'the job to ignore TERM' });
    await c.process({ action: 'kill', sessionId: first.sessionId, graceMs: 300 });
    await c.process({ action: 'clear', sessionId: first.sessionId });
    await waitFor(async () => (await c.process({ action: 'list' })).sessions.length === 0 || undefined);
    const before = await diagnose(c);
    const scratchBefore = scratchDirs(d.dir).length;

    const statuses = new Map<string, number>();
    const count = (s: string) => statuses.set(s, (statuses.get(s) ?? 0) + 1);

    await Promise.all([
      // The default: stdin is a pipe that nobody closes.
      runMany(1500, 6, async (i) => count(await execAndClear(c, { command: i % 3 === 0 ? 'echo out; echo err >&2' : 'true' }))),
      runMany(300, 2, async () => count(await execAndClear(c, { command: 'cat', stdin: 'null' }))),
      runMany(100, 2, async () => count(await execAndClear(c, { command: 'echo on a terminal', pty: true }))),
      // Killed while running: a job that never reads its stdin, and one blocked reading it.
      runMany(100, 2, async (i) => {
        const r = await c.exec({ command: i % 2 ? 'sleep 30' : 'read x', background: true });
        const k = await c.process({ action: 'kill', sessionId: r.sessionId });
        count(k.status);
        await c.process({ action: 'clear', sessionId: r.sessionId });
      }),
      runMany(40, 20, async () => count(await execAndClear(c, { command: 'sleep 30', timeout: 0.2 }))),
      // Removed while running (remove kills, then forgets).
      runMany(60, 2, async () => {
        const r = await c.exec({ command: 'sleep 30', background: true });
        count((await c.process({ action: 'remove', sessionId: r.sessionId })).status);
      }),
      // Replaced: each start with the same key stops the one before.
      (async () => {
        const ids: string[] = [];
        for (let i = 0; i < 40; i++) ids.push((await c.exec({ command: 'sleep 30', key: 'leak', background: true })).sessionId);
        await c.process({ action: 'kill', sessionId: ids[ids.length - 1] });
        for (const sessionId of ids) {
          count((await c.process({ action: 'clear', sessionId })).status);
        }
      })(),
    ]);
    expect(statuses.get('completed')).toBe(1500 + 300 + 100);
    expect(statuses.get('failed')).toBe(100 + 40 + 60 + 40);

    await expectNothingHeld(d, c, before);
    expect(scratchDirs(d.dir).length).toBeLessThanOrEqual(scratchBefore);
    c.close();
  });

  it('runs 600 commands under a limit of 256 open files without one failure', { timeout: 180_000 }, async () => {
    const d = await startDaemon({ launcher: ['prlimit', '--nofile=256:256', '--'] });
    const c = await d.client();
    let failed = 0;
    await runMany(600, 4, async () => {
      const r = await c.request('exec', { command: 'echo ok' });
      if (r.error || r.result.status !== 'completed' || r.result.output !== 'ok\n') failed++;
      if (r.result) await c.process({ action: 'clear', sessionId: r.result.sessionId });
    });
    expect(failed).toBe(0);
    expect((await diagnose(c)).fds).toBeLessThan(64);
    c.close();
  });
});
