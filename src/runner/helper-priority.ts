import { nativeSpawner } from './native.js';
import { samplingThread } from './sample-thread.js';

/**
 * The priority of the daemon's helper threads (the samplers' thread, runner/sample-thread.ts; the
 * input watcher's looks thread, native/spawn.c), set once the cgroups are known and before either
 * is made. Each hands its answers to the main thread under a lock it holds while it wakes it: the
 * main thread preempts it and may wait for that lock. Where each session has a CPU group of its
 * own, the daemon's group holds only the daemon, and an idle-priority thread gets the core as
 * soon as the main thread waits: it runs at idle priority, so a request preempts its reads at
 * once. Where jobs share the daemon's group (no cpu controller for sessions), a busy job would
 * keep an idle thread off the core for a long time, and the main thread waiting for its lock
 * with it: there they run at normal priority.
 *
 * V8's platform workers (the collector's concurrent and parallel work, the optimizing compiler)
 * stay at normal priority. At idle priority a request preempted them at once (on the bench's one
 * core the slow polls fell; docs/benchmarks.md), but the main thread also waits on them: a
 * parallel scavenge's join, the safepoint before a collection, the atomic pause of a full one.
 * With every core busy with jobs in their own groups, a worker holding the last piece would get
 * the daemon's group's share of its core only in proportion to its weight there (3 against the
 * main thread's 1,024), and every request would wait with the main thread.
 */
export function setHelperPriority(sessionsHaveCpuGroups: boolean): void {
  samplingThread.lowPriority = sessionsHaveCpuGroups;
  const addon = nativeSpawner();
  if (!(addon instanceof Error)) addon.lookThreadIdle?.(sessionsHaveCpuGroups);
}
