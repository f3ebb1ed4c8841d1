import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../../src/config/schema.js';
import { InterruptWatcher } from '../../../src/interrupt/watcher.js';
import type { Registry } from '../../../src/session/registry.js';

/** A session the watcher visits and passes over (not running), each visit costing `costMs` of this thread. */
function slowSession(id: number, costMs: number, visits: { n: number }) {
  return {
    id: `s${id}`,
    get running() {
      visits.n++;
      const until = performance.now() + costMs;
      while (performance.now() < until);
      return false;
    },
  };
}

/**
 * A watcher over a crowd of 1,000 sessions the sweep walks slowly (7 a sweep, at every eighth
 * tick), and `add` for a session of the test's own, which the registry finds by id and tells the
 * watcher of, as the daemon's does.
 */
function crowdWatcher() {
  const visits = { n: 0 };
  const crowd = Array.from({ length: 1000 }, (_, i) => slowSession(i, 0.02, visits));
  let added: ((s: unknown) => void) | undefined;
  const byId = new Map<string, unknown>();
  const registry = {
    find: (_scope: string, id: string) => byId.get(id),
    live: () => crowd.values(),
    hasLive: () => true,
    onAdd: (fn: (s: unknown) => void) => (added = fn),
  } as unknown as Registry;
  const config = () => ({ interrupt: { enabled: true, promptPatterns: [] } }) as unknown as Config;
  const watcher = new InterruptWatcher(registry, config, pino({ level: 'silent' }));
  const add = (s: { id: string }) => {
    byId.set(s.id, s);
    added!(s);
  };
  return { watcher, add };
}

describe('InterruptWatcher: a tick holds the thread briefly', () => {
  it('ends its sweep once it has held the thread for its slice, however many sessions are left to visit', () => {
    const visits = { n: 0 };
    // 1,000 sessions, each visit 20 µs: a sweep of 200 would hold the thread 4 ms.
    const sessions = Array.from({ length: 1000 }, (_, i) => slowSession(i, 0.02, visits));
    const registry = { find: () => undefined, live: () => sessions.values(), hasLive: () => true, onAdd: () => {} } as unknown as Registry;
    const config = () => ({ interrupt: { enabled: true, promptPatterns: [] } }) as unknown as Config;
    const watcher = new InterruptWatcher(registry, config, pino({ level: 'silent' }));
    // On the sweep's grid of half-seconds (what needs a visit sooner is planned).
    const t0 = 1_000_000_000_000;
    watcher.tick(t0);
    // The slice (0.05 ms) is checked every 8 visits: past it after 3, so the sweep stops at the 8th.
    expect(visits.n).toBe(7);
    // Ticks before the next grid point do not sweep.
    for (let t = t0 + 50; t < t0 + 500; t += 50) watcher.tick(t);
    expect(visits.n).toBe(7);
    // The one at it goes on where the first stopped, and a pass still reaches every session.
    watcher.tick(t0 + 500);
    expect(visits.n).toBe(14);
    for (let i = 2; i < 20_000 && visits.n < 1000; i++) watcher.tick(t0 + 500 * i);
    expect(visits.n).toBeGreaterThanOrEqual(1000);
  });

  it("plans a new session and an interrupt's expiry without waiting for the sweep to come round", () => {
    const { watcher, add } = crowdWatcher();
    const start = Date.now();
    // A running session with a pending interrupt that expires 1 s after it started; the sweep
    // (7 of the 1,000 a tick) would reach it after many seconds of ticks.
    let expired = 0;
    let visited = 0;
    const fresh = {
      id: 'fresh',
      get running() {
        visited++;
        return true;
      },
      paused: false,
      startedAt: start,
      output: { lastOutputAt: undefined },
      interrupt: { expiresAt: start + 1000 },
      closeInput: () => {},
      settleInterrupt: () => expired++,
    };
    add(fresh);
    // Its first visit is planned when its quiet period could first count (150 ms): it plans the expiry.
    watcher.tick(start + 200);
    expect(visited).toBeGreaterThanOrEqual(1);
    expect(expired).toBe(0);
    // The next tick after the expiry expires it, though the sweep is nowhere near it.
    watcher.tick(start + 1100);
    expect(expired).toBe(1);
    // Answered, or written to, or continued (each starts a quiet period that output does not):
    // the session says so, and is visited again once that period could count, not a pass later.
    (fresh as { interrupt?: unknown }).interrupt = undefined;
    const before = visited;
    (fresh as unknown as { quietRestarted: () => void }).quietRestarted();
    watcher.tick(start + 1300);
    expect(visited).toBeGreaterThan(before);
  });

  it('comes back to a session whose process is still starting, without waiting for the sweep', () => {
    const { watcher, add } = crowdWatcher();
    const start = Date.now();
    // Visits counted where a visit looks at its input (planning it on add does not).
    let visited = 0;
    let running = true;
    const starting = {
      id: 'starting',
      get running() {
        return running;
      },
      paused: false,
      startedAt: start,
      output: { lastOutputAt: undefined },
      get stdinOpen() {
        visited++;
        return true;
      },
      pid: undefined as number | undefined,
      input: undefined,
    };
    add(starting);
    // Its first visit (when its quiet period could first count) finds no process yet.
    watcher.tick(start + 200);
    expect(visited).toBe(1);
    // Not before 150 ms have passed, then again, however far the sweep is.
    watcher.tick(start + 300);
    expect(visited).toBe(1);
    watcher.tick(start + 360);
    expect(visited).toBe(2);
    // Once it has ended, it is not planned again.
    running = false;
    watcher.tick(start + 520);
    watcher.tick(start + 2000);
    expect(visited).toBe(2);
  });
});
