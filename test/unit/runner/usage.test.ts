import { describe, expect, it, vi } from 'vitest';
import type { Resources } from '../../../src/cgroup/session.js';
import { UsageSampler } from '../../../src/runner/usage.js';
import { waitFor } from '../../helpers/daemon.js';

/** A reader whose figures grow with each read of a key, so a test can tell a fresh sample from a held one. */
function counter() {
  const reads = new Map<number, number>();
  const read = (key: number): Resources => {
    const n = (reads.get(key) ?? 0) + 1;
    reads.set(key, n);
    return { cpuMs: n, memoryBytes: key, memoryPeakBytes: key, processes: 1 };
  };
  return { reads, read, total: () => [...reads.values()].reduce((a, b) => a + b, 0) };
}

const FAST = { everyMs: 20, idleRefreshes: 2 };
const keys = Array.from({ length: 50 }, (_, i) => i);

describe('UsageSampler: one held sample per session, not a read per ask', () => {
  it('answers repeated asks for many sessions from one read of each', () => {
    const c = counter();
    // A period no test waits out: only first asks can read.
    const sampler = new UsageSampler(c.read, () => true, { everyMs: 3_600_000, idleRefreshes: 1 });
    try {
      for (let call = 0; call < 10; call++) for (const k of keys) expect(sampler.of(k).memoryBytes).toBe(k);
      expect(c.total()).toBe(keys.length);
      expect(sampler.reads).toBe(keys.length);
    } finally {
      sampler.close();
    }
  });

  it('reads the held samples again while they are asked for', async () => {
    const c = counter();
    const sampler = new UsageSampler(c.read, () => true, FAST);
    try {
      for (const k of keys) sampler.of(k);
      // Each ask finds the latest refresh; every key is read again, not just the first ones of a turn.
      await waitFor(() => keys.every((k) => sampler.of(k).cpuMs >= 3), { what: 'two refreshes of every held sample' });
      expect(sampler.active).toBe(true);
    } finally {
      sampler.close();
    }
  });

  it('lets every sample go and stops its timer once nobody asks', async () => {
    const c = counter();
    const sampler = new UsageSampler(c.read, () => true, FAST);
    for (const k of keys) sampler.of(k);
    expect(sampler.active).toBe(true);
    await waitFor(() => !sampler.active, { what: 'the sampler to stop' });
    expect(sampler.size).toBe(0);
    const before = c.total();
    // Nothing reads on its own once stopped; the next ask reads afresh.
    const fresh = sampler.of(7);
    expect(fresh.cpuMs).toBe(c.reads.get(7));
    expect(c.total()).toBe(before + 1);
    sampler.close();
  });

  it('drops a session that stopped running at the next refresh, and reads it no more', async () => {
    const c = counter();
    const running = new Set(keys);
    const sampler = new UsageSampler(c.read, (k: number) => running.has(k), FAST);
    try {
      for (const k of keys) sampler.of(k);
      running.delete(3);
      await waitFor(() => {
        sampler.of(1);
        return sampler.size === 1;
      }, { what: 'the ended and the unasked samples to be let go' });
      const readsOf3 = c.reads.get(3);
      const readsOf1 = c.reads.get(1)!;
      await waitFor(() => sampler.of(1).cpuMs >= readsOf1 + 2, { what: 'two more refreshes of the session still asked for' });
      expect(c.reads.get(3)).toBe(readsOf3);
    } finally {
      sampler.close();
    }
  });

  it('counts a change to what it holds in its version: a key held or let go, a sample made anew; not a read with the same figures', async () => {
    // Key 1's figures grow with each read; key 2's stay put.
    const reads = new Map<number, number>();
    const read = (key: number): Resources => {
      const n = (reads.get(key) ?? 0) + 1;
      reads.set(key, n);
      return { cpuMs: key === 1 ? n : 0, memoryBytes: key, memoryPeakBytes: key, processes: 1 };
    };
    const same = (a: Resources, b: Resources) => a.cpuMs === b.cpuMs;
    const sampler = new UsageSampler(read, () => true, { ...FAST, idleRefreshes: 1_000_000 }, same);
    try {
      const v0 = sampler.version;
      sampler.of(2);
      expect(sampler.version).toBeGreaterThan(v0);
      const v1 = sampler.version;
      // Asked again, read by nobody: the same.
      sampler.of(2);
      expect(sampler.version).toBe(v1);
      await waitFor(() => (reads.get(2) ?? 0) >= 3, { what: 'two refreshes of a sample whose figures stay put' });
      expect(sampler.version).toBe(v1);
      sampler.of(1);
      const v2 = sampler.version;
      expect(v2).toBeGreaterThan(v1);
      await waitFor(() => sampler.version > v2, { what: 'a refresh that made a sample anew' });
      const v3 = sampler.version;
      sampler.close();
      expect(sampler.version).toBeGreaterThan(v3);
    } finally {
      sampler.close();
    }
  });

  it('askAll keeps every held sample as asked for, as asking each would, and lets them go once it stops', async () => {
    const c = counter();
    const sampler = new UsageSampler(c.read, () => true, FAST);
    try {
      for (const k of keys) sampler.of(k);
      const before = c.reads.get(7)!;
      // Only askAll, each turn: every sample is still read again, none let go.
      await waitFor(() => {
        sampler.askAll();
        return (c.reads.get(7) ?? 0) >= before + 4;
      }, { what: 'four refreshes while askAll is called' });
      expect(sampler.size).toBe(keys.length);
      expect(keys.every((k) => c.reads.get(k)! >= before + 3)).toBe(true);
      // Nobody asks: let go as ever.
      await waitFor(() => !sampler.active, { what: 'the sampler to stop once askAll is no longer called' });
      expect(sampler.size).toBe(0);
    } finally {
      sampler.close();
    }
  });

  it('holds many keys a few first reads per turn, so whatever else is waiting runs between them', async () => {
    const c = counter();
    const sampler = new UsageSampler(c.read, () => true, { everyMs: 3_600_000, idleRefreshes: 1 });
    try {
      const many = Array.from({ length: 100 }, (_, i) => i);
      const readsSeenBetween: number[] = [];
      const watch = () => {
        readsSeenBetween.push(c.total());
        if (c.total() < many.length) setImmediate(watch);
      };
      const reading = sampler.hold(many);
      setImmediate(watch);
      expect(reading).toBeInstanceOf(Promise);
      await reading;
      // Something else ran while some were read and others were not yet.
      expect(readsSeenBetween.some((n) => n > 0 && n < many.length)).toBe(true);
      // Each read once, and held: asked again, nothing waits and nothing is read.
      expect(c.total()).toBe(many.length);
      expect(sampler.hold(many)).toBeUndefined();
      for (const k of many) expect(sampler.of(k).memoryBytes).toBe(k);
      expect(c.total()).toBe(many.length);
      // A handful not held is read at once, with nothing to wait for; keys not wanted are not read.
      expect(sampler.hold([200, 201, 202, 203], (k) => k !== 203)).toBeUndefined();
      expect([c.reads.get(200), c.reads.get(203)]).toEqual([1, undefined]);
    } finally {
      sampler.close();
    }
  });

  it('keeps the held sample, the same object, when a refresh reads the same figures; a new one when they moved', async () => {
    // Figures that stay put for even keys and grow with each read for odd ones.
    const reads = new Map<number, number>();
    const read = (key: number): Resources => {
      const n = (reads.get(key) ?? 0) + 1;
      reads.set(key, n);
      return { cpuMs: key % 2 ? n : 0, memoryBytes: key, memoryPeakBytes: key, processes: 1 };
    };
    const same = (a: Resources, b: Resources) => a.cpuMs === b.cpuMs && a.memoryBytes === b.memoryBytes && a.memoryPeakBytes === b.memoryPeakBytes && a.processes === b.processes;
    // Nothing let go for want of asks while the test waits (a sample let go is read afresh: a new object).
    const sampler = new UsageSampler(read, () => true, { ...FAST, idleRefreshes: 1_000_000 }, same);
    try {
      const first = keys.map((k) => sampler.of(k));
      await waitFor(() => keys.every((k) => (reads.get(k) ?? 0) >= 3), { what: 'two refreshes of every held sample' });
      for (const k of keys) {
        if (k % 2) expect(sampler.of(k)).not.toBe(first[k]);
        else expect(sampler.of(k)).toBe(first[k]);
      }
      expect(sampler.of(1).cpuMs).toBeGreaterThanOrEqual(3);
    } finally {
      sampler.close();
    }
  });

  it('ends a refresh turn once it has read for its slice, so a request waits behind one slow read, not four', async () => {
    // Each read costs 1 ms of this thread; the slice is 0.1 ms: one read a turn, though four are allowed.
    const c = counter();
    const slow = (key: number) => {
      const until = performance.now() + 1;
      while (performance.now() < until);
      return c.read(key);
    };
    const sampler = new UsageSampler(slow, () => true, { everyMs: 20, idleRefreshes: 1_000, sliceMs: 0.1, budget: 1 });
    try {
      const few = keys.slice(0, 12);
      for (const k of few) sampler.of(k);
      const first = c.total();
      // Count the reads made between two turns of the loop while a refresh runs.
      const perTurn: number[] = [];
      let last = c.total();
      const watch = () => {
        const now = c.total();
        if (now > last) perTurn.push(now - last);
        last = now;
        if (now < first + few.length) setImmediate(watch);
      };
      setImmediate(watch);
      await waitFor(() => c.total() >= first + few.length, { what: 'a refresh of every key' });
      expect(perTurn.length).toBeGreaterThan(0);
      expect(Math.max(...perTurn)).toBe(1);
    } finally {
      sampler.close();
    }
  });

  it('holds many keys a slice of first reads per turn: a request waits behind one slow read, not sixteen', async () => {
    // Each read costs 1 ms of this thread; the slice is 0.1 ms: one read a turn, though sixteen are allowed.
    const c = counter();
    const slow = (key: number) => {
      const until = performance.now() + 1;
      while (performance.now() < until);
      return c.read(key);
    };
    const sampler = new UsageSampler(slow, () => true, { everyMs: 3_600_000, idleRefreshes: 1, sliceMs: 0.1 });
    try {
      const many = Array.from({ length: 40 }, (_, i) => i);
      const perTurn: number[] = [];
      const reading = sampler.hold(many);
      // The first turn read in the request that asked; from here, one watch between two turns.
      expect(c.total()).toBe(1);
      // The first watch only notes where the reads are; between it and each next one, one turn reads.
      let last = -1;
      const watch = () => {
        const now = c.total();
        if (last >= 0 && now > last) perTurn.push(now - last);
        last = now;
        if (now < many.length) setImmediate(watch);
      };
      setImmediate(watch);
      await reading;
      expect(c.total()).toBe(many.length);
      expect(perTurn.length).toBeGreaterThan(0);
      expect(Math.max(...perTurn)).toBe(1);
    } finally {
      sampler.close();
    }
  });

  it('keeps its refreshes to its budget of the thread: slow reads make the next refresh wait', async () => {
    // Each read costs 2 ms of this thread: 50 keys are ~100 ms a refresh.
    const slowRead = (c: ReturnType<typeof counter>) => (key: number) => {
      const until = performance.now() + 2;
      while (performance.now() < until);
      return c.read(key);
    };
    const refreshesIn = async (budget: number) => {
      const c = counter();
      const sampler = new UsageSampler(slowRead(c), () => true, { everyMs: 20, idleRefreshes: 1_000, budget });
      try {
        for (const k of keys) sampler.of(k);
        await waitFor(() => keys.every((k) => (c.reads.get(k) ?? 0) >= 2), { what: 'the first refresh' });
        const after = c.total();
        await new Promise((r) => setTimeout(r, 1000));
        return (c.total() - after) / keys.length;
      } finally {
        sampler.close();
      }
    };
    // At 5% of the thread a ~100 ms refresh waits ~2 s (longer on a slower machine): none in the next second.
    expect(await refreshesIn(0.05)).toBeLessThan(1);
    // With the whole thread to use, the same reads refresh again within that second.
    expect(await refreshesIn(1)).toBeGreaterThanOrEqual(1);
  }, 30_000);

  it('reads refreshes elsewhere when it can: each held sample sent once by number, the samples put in together, here again once that fails', async () => {
    const c = counter();
    const batches: { ids: number[]; fresh: number[] }[] = [];
    let failing = false;
    const elsewhere = {
      read: (ks: number[], ids: Int32Array, fresh: number[]) => {
        batches.push({ ids: [...ids], fresh: [...fresh] });
        if (failing) return Promise.reject(new Error('gone'));
        // The reads made there: the same counter, so a fresh sample shows.
        const read = ks.map((k) => c.read(k));
        return Promise.resolve({ cpuMs: 0, sample: (i: number, held: Resources) => (read[i].cpuMs === held.cpuMs ? held : read[i]) });
      },
    };
    const sampler = new UsageSampler(c.read, () => true, { everyMs: 20, idleRefreshes: 2, threadIdleRefreshes: 1_000 }, undefined, elsewhere);
    try {
      for (const k of keys) sampler.of(k);
      await waitFor(() => batches.length >= 3 && keys.every((k) => sampler.of(k).cpuMs >= 3), { what: 'refreshes read elsewhere' });
      // The first batch sends every sample's plan; the next ones only their numbers, the same ones.
      expect(batches[0].fresh).toEqual(keys.map((_, i) => i));
      expect(batches[1].fresh).toEqual([]);
      expect(batches[1].ids).toEqual(batches[0].ids);
      expect(new Set(batches[0].ids).size).toBe(keys.length);
      // A sample held anew is a new number, with its plan.
      sampler.of(1000);
      const seen = batches.length;
      await waitFor(() => batches.length > seen, { what: 'the next batch' });
      const next = batches[batches.length - 1];
      expect(next.fresh).toEqual([keys.length]);
      expect(next.ids.slice(0, keys.length)).toEqual(batches[0].ids);
      // Read there, a sample unasked is kept longer (threadIdleRefreshes) than idleRefreshes.
      await waitFor(() => batches.length > seen + 4, { what: 'more batches' });
      expect(sampler.size).toBe(keys.length + 1);
      // Once the reads there fail, the refresh reads here (and keeps what is unasked only idleRefreshes).
      failing = true;
      const here = c.reads.get(7)!;
      await waitFor(() => sampler.of(7) && (c.reads.get(7) ?? 0) > here + 1, { what: 'refreshes read here after a failed batch' });
      await waitFor(() => sampler.of(7) && sampler.size === 1, { what: 'the unasked samples let go' });
    } finally {
      sampler.close();
    }
  });

  it('reads the samples kept there only every fifth refresh once nobody asks for any, and every refresh again once one is asked', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
    const c = counter();
    let batches = 0;
    const elsewhere = {
      read: () => {
        batches++;
        return Promise.resolve({ cpuMs: 0, sample: () => undefined });
      },
    };
    const sampler = new UsageSampler(c.read, () => true, { everyMs: 20, idleRefreshes: 2, threadIdleRefreshes: 1_000 }, undefined, elsewhere);
    /** Batches sent over the next `n` refreshes (one each 20 ms). */
    const over = async (n: number) => {
      const from = batches;
      for (let i = 0; i < n; i++) await vi.advanceTimersByTimeAsync(20);
      return batches - from;
    };
    try {
      for (const k of keys) sampler.of(k);
      // Asked for at refresh 0: the first two refreshes read them.
      expect(await over(2)).toBe(2);
      // Unasked for more than idleRefreshes: refreshes 3 and 4 read nothing, the fifth does...
      expect(await over(3)).toBe(1);
      // ...and every fifth after it; all are still held.
      expect(await over(20)).toBe(4);
      expect(sampler.size).toBe(keys.length);
      // One asked for again: every refresh reads again.
      sampler.of(keys[3]);
      expect(await over(2)).toBe(2);
    } finally {
      sampler.close();
      vi.useRealTimers();
    }
  });

  it('reads here while a batch sent elsewhere is late, drops its answer when it comes, and sends the next batch there again', async () => {
    const c = counter();
    let hold: ((b: { cpuMs: number; sample: () => Resources | undefined }) => void) | undefined;
    let batches = 0;
    const elsewhere = {
      read: () => {
        batches++;
        // The first batch is not answered until the test says so (a thread starved of the CPU).
        if (batches === 1) return new Promise<{ cpuMs: number; sample: () => Resources | undefined }>((resolve) => (hold = resolve));
        return Promise.resolve({ cpuMs: 0, sample: () => undefined });
      },
    };
    const sampler = new UsageSampler(c.read, () => true, { everyMs: 20, idleRefreshes: 1_000 }, undefined, elsewhere);
    try {
      sampler.of(1);
      const first = c.reads.get(1)!;
      // Past the late batch's deadline, refreshes read here, and send nothing more meanwhile.
      await waitFor(() => sampler.of(1).cpuMs >= first + 2, { what: 'refreshes read here while the batch is late' });
      expect(batches).toBe(1);
      // The late answer, when it comes, is dropped (it would put back an old sample); the next batch goes there again.
      const before = sampler.of(1);
      hold!({ cpuMs: 0, sample: () => ({ cpuMs: -1, memoryBytes: 0, memoryPeakBytes: 0, processes: 0 }) });
      await waitFor(() => batches >= 2, { what: 'a batch sent there again' });
      expect(sampler.of(1).cpuMs).toBeGreaterThanOrEqual(before.cpuMs);
    } finally {
      sampler.close();
    }
  });
});
