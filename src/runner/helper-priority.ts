import { nativeSpawner } from './native.js';
import { samplingThread } from './sample-thread.js';

/** The threads Node made before any of the daemon's code ran (noteBootThreads). */
let bootThreads: readonly number[] = [];

/**
 * Note the threads this process had before any of the daemon's code ran, as bin/procctld listed
 * them first thing (/proc/self/task, the main thread left out): V8's platform workers, which run
 * the collector's concurrent marking and sweeping, its parallel scavenges' helpers and the
 * optimizing compiler, and Node's delayed-task and signal-watcher threads. libuv's pool, which
 * does the daemon's file work, is made later, at its first use, and is not among them.
 */
export function noteBootThreads(tids: readonly number[]): void {
  bootThreads = tids.filter((t) => Number.isInteger(t) && t > 0 && t !== process.pid);
}

/**
 * The priority of the daemon's helper threads (the samplers' thread, runner/sample-thread.ts; the
 * input watcher's looks thread, native/spawn.c; V8's platform workers, noteBootThreads), set once
 * the cgroups are known. Each helper's work can wait; a request cannot.
 *
 * Where each session has a CPU group of its own, the daemon's group holds only the daemon, and an
 * idle-priority thread gets the core as soon as the main thread waits: they run at SCHED_IDLE, so
 * a request preempts them at once. At a normal priority the kernel lets a thread it has picked run
 * out its slice (1.5 ms and more): traced at 1,000 sessions on one core, V8's workers held a
 * waiting request for 0.3-3.3 ms, the slowest polls' largest cause. A parallel scavenge the main
 * thread joins still ends: the main thread does what no worker took, and once it waits, the
 * worker holding the last piece has the core.
 *
 * Where jobs share the daemon's group (no cpu controller for sessions), a busy job would keep an
 * idle thread off the core for a long time (a look batch waited 1,046 ms), and the main thread
 * waiting for it with it: there every helper runs at normal priority.
 */
export function setHelperPriority(sessionsHaveCpuGroups: boolean): void {
  samplingThread.lowPriority = sessionsHaveCpuGroups;
  const addon = nativeSpawner();
  if (addon instanceof Error) return;
  addon.lookThreadIdle?.(sessionsHaveCpuGroups);
  if (!sessionsHaveCpuGroups || !addon.idleThread) return;
  for (const tid of bootThreads) {
    try {
      addon.idleThread(tid);
    } catch {
      // Gone (a thread Node ended), or refused: it runs as it did.
    }
  }
}
