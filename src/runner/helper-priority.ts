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
 */
export function setHelperPriority(sessionsHaveCpuGroups: boolean): void {
  samplingThread.lowPriority = sessionsHaveCpuGroups;
  const addon = nativeSpawner();
  if (!(addon instanceof Error)) addon.lookThreadIdle?.(sessionsHaveCpuGroups);
}
