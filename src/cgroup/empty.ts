import { watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import type { SessionCgroup } from './session.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Where the kernel cannot say when a cgroup empties (v1), it is looked at again at most this long after. */
const V1_LOOK_MS = 10;

/**
 * Resolves true once nothing of the session's cgroup is alive, false if `withinMs` runs out
 * first. On v2 the kernel says when `populated` changes: cgroup.events is modified then, and an
 * inotify watch on it wakes the wait at once. v1 has no such file, so there the members are
 * looked at again every few milliseconds.
 */
export function whenEmpty(cg: SessionCgroup, withinMs: number): Promise<boolean> {
  if (!cg.populated()) return Promise.resolve(true);
  if (withinMs <= 0) return Promise.resolve(false);
  if (cg.v2 === undefined) return lookUntilEmpty(cg, withinMs);
  const events = join(cg.v2, 'cgroup.events');
  return new Promise<boolean>((resolve) => {
    let watcher: FSWatcher | undefined;
    let timer: NodeJS.Timeout | undefined;
    let settled = false;
    const settle = (empty: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      watcher?.close();
      resolve(empty);
    };
    const look = () => {
      if (!cg.populated()) settle(true);
    };
    try {
      // A removed cgroup ends the watch with a rename event, and reads as empty.
      watcher = watch(events, { persistent: false }, look);
      watcher.on('error', () => {
        watcher = undefined;
        if (!settled) void lookUntilEmpty(cg, withinMs).then(settle);
      });
    } catch {
      // No watch to be had (out of inotify watches): look instead.
      void lookUntilEmpty(cg, withinMs).then(settle);
      return;
    }
    // It may have emptied between the first look and the watch.
    look();
    if (!settled) timer = setTimeout(() => settle(!cg.populated()), withinMs);
  });
}

/** Look at the cgroup until it is empty or the time runs out, the pauses growing to V1_LOOK_MS. */
async function lookUntilEmpty(cg: SessionCgroup, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  let pause = 1;
  for (;;) {
    if (!cg.populated()) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await sleep(Math.min(pause, left));
    pause = Math.min(pause * 2, V1_LOOK_MS);
  }
}
