/**
 * Where a planned restart's time goes (docs/durability.md "Where a restart's time goes"): the old
 * image notes when each of its steps ended, the new one when it was loaded, read its config, took
 * the sessions back and served; the new image logs the whole as one line, each step's length in
 * ms, with the CPU the new image used from the exec until it served (a figure a loaded machine
 * does not stretch as it stretches wall times), and that CPU step by step (`cpu`).
 */
const marks: [string, number, number][] = [];

/**
 * Which image bin/procctld started (docs/durability.md "The daemon's image, bundled"): the one-file
 * bundle, and whether V8 took its code cache, or the compiled sources, and why. Logged when the
 * daemon listens and with a restart's timeline, so a start that left the fast path says so.
 */
export interface ImageStart {
  image: 'bundle' | 'sources';
  /** The bundle's code cache: used, rejected by this node (another version or flags), or none beside it. */
  codeCache?: 'used' | 'rejected' | 'none';
  /** Why the compiled sources run (the bundle is stale or turned off). */
  why?: string;
}

/** A step of this image's start ended now. */
export function mark(step: string): void {
  marks.push([step, Date.now(), cpuMs()]);
}

/** The CPU this process has used so far, in ms (it goes on counting across an exec: same process). */
export function cpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * Each step's length (ms), in order: the old image's (from `at`, the request), the exec until
 * this image's Node started (`boot`), then this image's; the CPU this image used, and each of its
 * steps' CPU (`cpu`, from the exec: `modules` holds Node's own start too).
 */
export function restartTimeline(from: { at: number; steps?: Record<string, number>; cpuMs?: number }): { steps: Record<string, number>; totalMs: number; imageCpuMs?: number; cpu?: Record<string, number> } {
  const steps: Record<string, number> = {};
  let last = from.at;
  const add = (name: string, t: number) => {
    steps[name] = Math.round(t - last);
    last = t;
  };
  for (const [name, t] of Object.entries(from.steps ?? {})) add(name, t);
  add('boot', performance.timeOrigin);
  for (const [name, t] of marks) add(name, t);
  if (from.cpuMs === undefined) return { steps, totalMs: Math.round(last - from.at) };
  const cpu: Record<string, number> = {};
  let used = from.cpuMs;
  for (const [name, , c] of marks) {
    cpu[name] = Math.round(c - used);
    used = c;
  }
  return { steps, totalMs: Math.round(last - from.at), imageCpuMs: Math.round(cpuMs() - from.cpuMs), cpu };
}
