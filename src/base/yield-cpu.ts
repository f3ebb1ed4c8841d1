import { loadAddon } from './addon.js';

let yieldNow: (() => void) | null | undefined;

/**
 * Let a thread that is ready to run on this CPU run before the caller goes on (sched_yield).
 * Linux wakes the reader of a Unix socket on the writer's CPU (a "sync" wake-up: it expects the
 * writer to sleep next), so what the daemon does after an exec's answer (the ended session's
 * record, its trail entry, its cgroup and directories let go) kept the client reading that answer
 * waiting 150-450 µs, with the other core idle (docs/benchmarks.md, the exec round trip). With
 * nothing else ready on this CPU it returns at once (~1 µs). Nothing where the addon cannot be had.
 */
function yieldCpu(): void {
  if (yieldNow === undefined) {
    const addon = loadAddon<{ yieldCpu(): void }>(['yieldCpu']);
    yieldNow = addon instanceof Error ? null : addon.yieldCpu;
  }
  yieldNow?.();
}

let owed = false;

/**
 * This turn has work queued behind its answers (a session ended: its record, trail entry and
 * cleanup follow): each answer written before the turn is over yields (`answered`). A turn
 * without it (a poll, a list, a status) sleeps after its answer, and a yield there would only let
 * the daemon's own helper threads take the CPU before the next request is read.
 */
export function yieldAfterAnswers(): void {
  if (owed) return;
  owed = true;
  setImmediate(() => {
    owed = false;
  });
}

/** An answer was written (rpc/connection.ts): its reader first, if this turn has work behind it. */
export function answered(): void {
  if (owed) yieldCpu();
}
