import pino from 'pino';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { Config } from '../../../src/config/schema.js';
import { InterruptWatcher } from '../../../src/interrupt/watcher.js';
import type { Registry } from '../../../src/session/registry.js';

// The kernel's answer, set by a test: which of the looks' leaders read their input (none by default).
const reading = new Set<number>();
vi.mock('../../../src/interrupt/kernel.js', () => ({
  readsOffLoop: () => true,
  lookThread: () => undefined,
  findStdinReaders: async (queries: { leader: number }[]) => queries.map((q) => (reading.has(q.leader) ? { pid: q.leader, how: 'read' } : undefined)),
}));

/**
 * A quiet session with its input open and no reader the watcher can ask the kernel about (no
 * stdin id): each look it is due for settles at once as "nobody reads", and backs off. `looks`
 * counts them (each reads its last line once per quiet period, then not again: so counted by
 * `stdinOpen`, read at every visit that gets past the running checks).
 */
function quietSession(id: string, start: number) {
  const counts = { visits: 0 };
  const s = {
    id,
    running: true,
    paused: false,
    interrupt: undefined,
    get stdinOpen() {
      counts.visits++;
      return true;
    },
    pid: 4242,
    input: {},
    stdinId: undefined,
    startedAt: start,
    lastInputAt: undefined as number | undefined,
    lastContinuedAt: undefined,
    output: { lastOutputAt: undefined, tail: () => 'building...\n' },
    quietRestarted: undefined as undefined | (() => void),
  };
  return { s, counts };
}

/**
 * A started watcher over the sessions given to `add` (the registry tells it of each, as the
 * daemon's does), and the times its ticks ran at. `lateMs`: each tick reads the clock this long
 * after its timer's time, as a real timer fires a little late.
 */
function startedWatcher(lateMs = 0, detection = { enabled: true }) {
  const sessions: { id: string }[] = [];
  let added: ((s: unknown) => void) | undefined;
  const registry = {
    find: (_scope: string, id: string) => sessions.find((s) => s.id === id),
    live: () => sessions.values(),
    hasLive: () => sessions.length > 0,
    onAdd: (fn: (s: unknown) => void) => (added = fn),
  } as unknown as Registry;
  const config = () => ({ interrupt: { enabled: detection.enabled, promptPatterns: [], timeoutSeconds: 300 } }) as unknown as Config;
  const watcher = new InterruptWatcher(registry, config, pino({ level: 'silent' }));
  const ticks: number[] = [];
  const tick = watcher.tick.bind(watcher);
  watcher.tick = (now: number) => {
    ticks.push(now);
    tick(now + lateMs);
  };
  watcher.start();
  const add = (s: { id: string }) => {
    sessions.push(s);
    added!(s);
  };
  return { watcher, ticks, add };
}

describe('InterruptWatcher: its timer is set for what is due, not a steady tick', () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: 1_000_000_000_000 });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('sleeps while no session is live', () => {
    const { watcher, ticks } = startedWatcher();
    vi.advanceTimersByTime(60_000);
    // The first tick, at start, finds nothing planned and nobody live: no timer after it.
    expect(ticks.length).toBe(1);
    expect(vi.getTimerCount()).toBe(0);
    watcher.stop();
  });

  it('looks at a quiet session with a backoff, its long waits on a half-second grid shared by the sweep, and comes at once when a quiet period restarts', () => {
    const start = Date.now();
    const { watcher, ticks, add } = startedWatcher();
    const { s, counts } = quietSession('quiet', start);
    add(s);
    vi.advanceTimersByTime(60_000);
    // Looked at again and again (no reader: the backoff doubles to 3 s, with jitter) ...
    expect(counts.visits).toBeGreaterThan(15);
    // ... in far fewer wake-ups than a tick every 50 ms (1,200 a minute): the sweep's two a
    // second, and the looks' own while the backoff is short.
    expect(ticks.length).toBeLessThan(160);
    // Once the backoff is long, every tick is on the grid.
    const late = ticks.filter((t) => t > start + 20_000);
    expect(late.length).toBeGreaterThan(0);
    expect(late.filter((t) => t % 500 !== 0)).toEqual([]);
    // Input written by hand restarts its quiet period: visited once that could count (150 ms),
    // not at the next grid point.
    vi.advanceTimersByTime(500 - (Date.now() % 500) + 20);
    const before = counts.visits;
    s.lastInputAt = Date.now();
    s.quietRestarted!();
    vi.advanceTimersByTime(200);
    expect(counts.visits).toBeGreaterThan(before);
    expect(ticks.at(-1)! % 500).not.toBe(0);
    watcher.stop();
    expect(vi.getTimerCount()).toBe(0);
  });

  it('raises a prompt as soon as a steady tick did: looked at on the first tick its quiet period counts, confirmed on the next', async () => {
    const start = Date.now() + 17; // between two ticks
    vi.setSystemTime(start);
    const { watcher, ticks, add } = startedWatcher(1);
    const raised: number[] = [];
    const { s } = quietSession('asking', start);
    Object.assign(s, {
      stdinId: '8:1234',
      pty: false,
      output: { lastOutputAt: start + 5, tail: () => 'Continue? [y/N] ' },
      raiseInterrupt: () => raised.push(Date.now()),
      emit: () => {},
    });
    reading.add(s.pid);
    add(s);
    await vi.advanceTimersByTimeAsync(1000);
    reading.clear();
    // Quiet from start + 5 and prompt-like: counted from start + 155, looked at on the first tick
    // of the 50 ms grid after it, seen reading, confirmed on the next, raised in the turn after
    // that (not a grid point later).
    const first = Math.ceil((start + 155) / 50) * 50;
    expect(ticks).toContain(first);
    expect(raised).toHaveLength(1);
    expect(raised[0]).toBeGreaterThanOrEqual(first + 50);
    expect(raised[0]).toBeLessThan(first + 100);
    watcher.stop();
  });

  it('with detection off, sweeps only every few seconds, and looks again soon after a reload switches it on', () => {
    const start = Date.now();
    const detection = { enabled: false };
    const { watcher, ticks, add } = startedWatcher(0, detection);
    const { s, counts } = quietSession('quiet', start);
    add(s);
    vi.advanceTimersByTime(60_000);
    // A sweep every 5 s (and the session's first planned visit): not two a second.
    expect(ticks.length).toBeLessThanOrEqual(14);
    expect(counts.visits).toBe(0);
    detection.enabled = true;
    vi.advanceTimersByTime(5500);
    expect(counts.visits).toBeGreaterThan(0);
    watcher.stop();
  });

  it('sets its next tick even when a visit throws', () => {
    const start = Date.now();
    const { watcher, ticks, add } = startedWatcher();
    const { s, counts } = quietSession('quiet', start);
    let fail = true;
    Object.defineProperty(s, 'paused', {
      get() {
        if (fail) {
          fail = false;
          throw new Error('a visit went wrong');
        }
        return false;
      },
    });
    add(s);
    expect(() => vi.advanceTimersByTime(1000)).toThrow('a visit went wrong');
    const after = ticks.length;
    vi.advanceTimersByTime(5000);
    expect(ticks.length).toBeGreaterThan(after);
    expect(counts.visits).toBeGreaterThan(0);
    watcher.stop();
  });

  it('ticks no more often than every 50 ms, however near the plans', () => {
    const start = Date.now();
    const { watcher, ticks, add } = startedWatcher();
    for (let i = 0; i < 20; i++) {
      const { s } = quietSession(`q${i}`, start + i * 7);
      add(s);
    }
    vi.advanceTimersByTime(10_000);
    for (let i = 1; i < ticks.length; i++) expect(ticks[i] - ticks[i - 1]).toBeGreaterThanOrEqual(50);
    watcher.stop();
  });
});
