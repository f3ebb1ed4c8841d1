import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';

// More quiet sessions than one tick of the watcher visits in turn (its sweep takes 200 a tick):
// sessions due for a look come from its schedule, the rest are found by the sweep.
const QUIET = 450;

let d: TestDaemon;
let c: TestClient;
const pids: number[] = [];

beforeAll(async () => {
  d = await startDaemon({ env: { PROCCTL_MAX_SESSIONS: String(QUIET + 50), PROCCTL_KILL_GRACE_MS: '500' } });
  c = await d.client();
  let next = 0;
  const worker = async () => {
    while (next < QUIET) {
      next++;
      const r = await c.call('exec', { command: 'sleep 600', background: true });
      expect(r.status).toBe('running');
      pids.push(r.pid);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}, 120_000);

afterAll(async () => {
  await c?.call('process', { action: 'kill', all: true }).catch(() => undefined);
  c?.close();
  await stopAllDaemons();
  killLeftovers(pids);
});

describe(`interrupts among ${QUIET} quiet sessions`, () => {
  it('a new session that asks is found, and none of the sleepers is', async () => {
    const r = await c.call('exec', { command: "printf 'Continue? [y/N] '; read a; echo got=$a", yieldMs: 30_000 });
    pids.push(r.pid);
    expect(r.status, JSON.stringify(r).slice(0, 300)).toBe('waiting_input');
    expect(r.interrupt).toMatchObject({ kind: 'confirm' });
    const list = await c.call('process', { action: 'list' });
    expect(list.sessions.filter((s: any) => s.status === 'waiting_input').map((s: any) => s.sessionId)).toEqual([r.sessionId]);
    await c.call('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
  }, 60_000);

  it('a session that asks after staying quiet (its looks backing off) is found', async () => {
    // Quiet for 4 s, so its looks are seconds apart, then it prints a prompt and reads.
    const r = await c.call('exec', { command: "sleep 4; printf 'Proceed? [y/N] '; read a", background: true });
    pids.push(r.pid);
    const waiting = await waitFor(
      async () => {
        const p = await c.call('process', { action: 'poll', sessionId: r.sessionId, timeout: 1000 });
        return p.status === 'waiting_input' ? p : undefined;
      },
      { timeoutMs: 30_000, what: 'the late prompt to be found' },
    );
    expect(waiting.interrupt).toMatchObject({ kind: 'confirm', reason: 'Proceed? [y/N]' });
  }, 60_000);
});
