import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { daemonStatus } from '../helpers/restart.js';
import { killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { guardianOf, makeStateDir, readRecords, removeStateDirs } from '../helpers/state.js';

/**
 * The guardian's queue full (docs/durability.md "A crash keeps the sessions"): the daemon sends
 * each session that runs on to the guardian's queue, which holds ~160; past that the daemon asks
 * it to drain and sends again what waited. Here the guardian is stopped (SIGSTOP) so that it
 * drains nothing while more sessions than its queue holds start; once it runs again, every
 * session reaches it, and a SIGKILL of the daemon keeps every one for the next.
 */

const pids = new Set<number>();
let stopped: number | undefined;

afterEach(async () => {
  if (stopped !== undefined && alive(stopped)) process.kill(stopped, 'SIGCONT');
  stopped = undefined;
  await stopAllDaemons();
  killLeftovers(pids);
});

afterAll(() => removeStateDirs());

describe('the guardian\'s queue full', () => {
  it('more sessions than the queue holds while the guardian drains nothing: each is sent again once it drains, and a crash keeps every one', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state, PROCCTL_ON_CRASH: 'keep', PROCCTL_CRASH_GRACE_MS: '60000', PROCCTL_MAX_SESSIONS: '400' };
    const d1 = await startDaemon({ env, args: ['--log-level', 'debug'] });
    const guardian = await waitFor(() => guardianOf(d1.proc.pid!), { what: 'the guardian' });
    process.kill(guardian!, 'SIGSTOP');
    stopped = guardian;
    const s = new Scoped(await d1.client(), 'many');
    const n = 220;
    const jobs: { sessionId: string; pid: number }[] = [];
    for (let i = 0; i < n; i++) {
      const j = await s.exec({ command: 'sleep 600', background: true });
      pids.add(j.pid);
      jobs.push(j);
    }
    await waitFor(() => d1.stdout().includes("the guardian's queue is full"), { what: 'the queue to be full', timeoutMs: 60_000 });
    await waitFor(
      () => {
        const records = readRecords(state);
        return jobs.every((j) => records.get(j.sessionId)?.pidStartTime !== undefined);
      },
      { what: 'every session\'s first record', timeoutMs: 60_000 },
    );
    expect(d1.stdout()).not.toContain('the guardian took every session that waited');
    process.kill(guardian!, 'SIGCONT');
    stopped = undefined;
    await waitFor(() => d1.stdout().includes('the guardian took every session that waited'), { what: 'the sessions that waited to be sent', timeoutMs: 60_000 });

    d1.proc.kill('SIGKILL');
    if (d1.proc.exitCode === null && d1.proc.signalCode === null) await new Promise((r) => d1.proc.once('exit', r));
    await waitFor(() => existsSync(join(state, 'guardian.sock')), { what: 'the guardian to wait for the next daemon', timeoutMs: 30_000 });
    for (const j of jobs) expect(alive(j.pid), j.sessionId).toBe(true);
    const d2 = await startDaemon({ env });
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: n, lost: 0 });
    await waitFor(() => [...readRecords(state).values()].filter((r) => r.adopted === 'crash').length === n, { what: 'every record to say adopted: crash' });
    for (const j of jobs) expect(alive(j.pid), j.sessionId).toBe(true);
  }, 300_000);
});
