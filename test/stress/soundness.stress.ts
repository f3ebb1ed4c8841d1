import { chmodSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { diagnose, execAndClear, runMany, stateFiles, type Diagnostics } from '../helpers/leaks.js';
import type { TestClient } from '../helpers/rpc.js';
import { makeStateDir, readRecords, removeStateDirs, sessionsDir } from '../helpers/state.js';

/** Root ignores permission bits: the daemon runs without the capabilities that let it (see disk-faults.test.ts). */
const asUser = process.getuid?.() === 0 ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search,-fowner', '--'] : [];

afterAll(async () => {
  await stopAllDaemons();
  removeStateDirs();
});

const MB = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

/** Sessions left to the TTL (the shortest there is, 60 s): started first, checked last, so the wait overlaps the rest. */
let ttl: { d: TestDaemon; c: TestClient; before: Diagnostics };
beforeAll(async () => {
  const d = await startDaemon({ env: { PROCCTL_JOB_TTL_MS: '60000' } });
  const c = await d.client();
  const before = await diagnose(c);
  await runMany(500, 4, async (i) => {
    const r = await c.exec({ command: i % 2 ? 'echo reaped' : 'sleep 0.05', ...(i % 5 === 0 ? { pty: true } : {}) });
    expect(r.status).toBe('completed');
  });
  ttl = { d, c, before };
});

describe('long use is flat', () => {
  // 75-120 s on two cores, idle to busy (spawning dominates); the deadline leaves room for a
  // machine loaded several times over.
  it('RSS after 10,000 exec+clear cycles is within 10% of RSS after the first 1,000', { timeout: 400_000 }, async () => {
    const d = await startDaemon();
    const c = await d.client();
    const samples: { cycles: number; rss: number; heapUsed: number; fds: number }[] = [];
    let cycles = 0;
    // Each reading follows a full collection; the lower of two leaves out pages not yet given back.
    const sample = async () => {
      const [x, y] = [await diagnose(c), await diagnose(c)];
      samples.push({ cycles, rss: Math.min(x.rss, y.rss), heapUsed: y.heapUsed, fds: y.fds });
    };
    for (let round = 0; round < 10; round++) {
      await runMany(1000, 4, async (i) => {
        const status = await execAndClear(c, { command: i % 4 === 0 ? 'printf "%s\\n" line-$RANDOM' : 'true', ...(i % 10 === 0 ? { stdin: 'null' } : {}) });
        expect(status).toBe('completed');
        cycles++;
      });
      await sample();
    }
    console.log(`RSS by thousands of cycles (MB): ${samples.map((s) => MB(s.rss)).join(' ')}; heap used: ${samples.map((s) => MB(s.heapUsed)).join(' ')}`);
    const first = samples[0];
    const last = samples[samples.length - 1];
    expect(last.rss).toBeLessThanOrEqual(first.rss * 1.1);
    expect(last.fds).toBeLessThanOrEqual(first.fds);
    expect((await diagnose(c)).objects.Session).toBe(0);
  });

  it('while the state directory refuses writes, sessions run and are answered, and a client elsewhere is unaffected', async () => {
    const state = makeStateDir();
    const d = await startDaemon({ launcher: asUser, env: { PROCCTL_STATE_DIR: state } });
    const c = await d.client();
    const other = await d.client();
    chmodSync(sessionsDir(state), 0o500);
    let otherCalls = 0;
    let stop = false;
    const bystander = (async () => {
      while (!stop) {
        const r = await other.exec({ command: 'echo fine', scope: 'elsewhere' });
        expect(r.output).toBe('fine\n');
        otherCalls++;
      }
    })();
    await runMany(500, 6, async (i) => {
      const r = await c.exec({ command: `seq 1 ${i}` });
      expect(r.status).toBe('completed');
      expect(r.output.split('\n').length).toBe(i + 1);
      // Never written, so nothing to delete: forgetting it succeeds and it stays forgotten.
      await c.process({ action: 'clear', sessionId: r.sessionId });
    });
    stop = true;
    await bystander;
    expect(otherCalls).toBeGreaterThan(0);
    expect((await c.call('daemon.status')).state.writable).toBe(false);
    chmodSync(sessionsDir(state), 0o700);
    await waitFor(async () => (await c.call('daemon.status')).state.writable || undefined, { what: 'writes to resume' });
    // The bystander's sessions finished while writes were refused: their records are written now.
    // (Records of ended sessions are lines of the journal: readRecords reads both kinds.)
    await waitFor(() => readRecords(state).size === otherCalls || undefined, {
      what: 'the waiting records on disk',
    });
    expect((await diagnose(c)).objects.Session).toBe(otherCalls);
  });
});

describe('TTL reaping', () => {
  it('forgets every finished session after its TTL, leaving nothing held', async () => {
    const { d, c, before } = ttl;
    await waitFor(async () => (await c.process({ action: 'list' })).sessions.length === 0 || undefined, {
      what: 'the TTL to forget every session',
      timeoutMs: 120_000,
      everyMs: 1000,
    });
    const after = await waitFor(
      async () => {
        const x = await diagnose(c);
        return x.objects.Session === 0 && x.fds <= before.fds + 2 ? x : undefined;
      },
      { what: 'nothing held' },
    );
    expect(after.objects).toMatchObject({ Session: 0, SessionOutput: 0, Spool: 0 });
    expect(stateFiles(d.dir)).toEqual([]);
  });
});
