import { SessionCgroup } from '../cgroup/session.js';
import type { CgroupLayout, V1Name } from '../cgroup/host.js';
import type { Rlimit } from '../sandbox/limits.js';
import type { LaunchPlan } from '../sandbox/plan.js';
import type { Session } from '../session/session.js';
import type { PipeEnds } from './launch/pipes.js';
import { holdWiring, spawnSession, wiringOf } from './spawn.js';

/** What the runner holds of a running session that a restart hands to the next image (SPEC §19). */
export interface HandedJob {
  ends: PipeEnds;
  /** Input written to the job that this image still held (it is said, not sent). */
  stdinQueued: number;
  timeoutSec: number;
  killGraceMs: number;
  limits: Rlimit[];
  cgroup?: { v2?: string; v1: Partial<Record<V1Name, string>> };
}

/**
 * Why this running session cannot be handed to a new image now, in words; undefined when it can.
 * A terminal, a sandbox's channels and a review's mounts are not carried yet: a restart with such
 * a session running is refused, and the old image goes on serving.
 */
export function cannotHandOver(s: Session): string | undefined {
  const w = wiringOf(s);
  if (!w || !w.launched) return 'it was not started by this daemon image';
  if (s.pty) return 'it runs on a terminal, which a restart does not carry yet';
  if (w.sandboxed) return 'it runs in a sandbox, whose channels a restart does not carry yet';
  if (w.channel) return 'it reports through a channel of its own (sandbox.user), which a restart does not carry yet';
  if (s.changes?.state === 'running') return 'it runs in review mode, whose mounts a restart does not carry yet';
  if (w.exited || s.stopping) return 'it is ending (its leader exited or a stop is under way)';
  if (!w.launched.ends?.() || !w.launched.holdOutput) return 'it was started by fork, without the addon';
  return undefined;
}

/** Stop reading every session's output until the returned resume (a restart's quiet moment). */
export function holdOutputs(sessions: readonly Session[]): () => void {
  const resumes = sessions.map((s) => {
    holdWiring(s, true);
    const resume = wiringOf(s)?.launched?.holdOutput?.() ?? (() => undefined);
    return () => {
      holdWiring(s, false);
      resume();
    };
  });
  return () => {
    for (const resume of resumes) resume();
  };
}

/** The job as the next image needs it; call only when cannotHandOver said nothing. */
export function handOver(s: Session): HandedJob {
  const w = wiringOf(s)!;
  const { stdinQueued, ...ends } = w.launched!.ends!()!;
  const cg = w.cgroup;
  return {
    ends,
    stdinQueued,
    timeoutSec: w.timeoutSec,
    killGraceMs: w.killGraceMs,
    limits: [...w.limits],
    ...(cg ? { cgroup: { ...(cg.v2 ? { v2: cg.v2 } : {}), v1: { ...cg.v1 } } } : {}),
  };
}

/** The descriptors of a handed job, which must survive the exec. */
export function handedDescriptors(job: HandedJob): number[] {
  return [job.ends.stdout, job.ends.stderr, ...(job.ends.stdin >= 0 ? [job.ends.stdin] : [])];
}

/**
 * Wire a job the last image started to its session again: output, exit, input, leftovers, its
 * cgroup and its timeout counted from the session's start, as spawnSession wires a new one.
 */
export function adoptJob(session: Session, job: HandedJob, layout: CgroupLayout, onCgroupStuck?: (dirs: string[]) => void): void {
  const cgroup = job.cgroup && layout.mode !== 'none' ? SessionCgroup.adopt(layout, job.cgroup) : undefined;
  const plan: LaunchPlan = {
    file: '',
    args: [],
    steps: undefined,
    wrapped: () => ({ file: '', args: [] }),
    sandboxed: false,
    limits: job.limits,
    notes: [],
    inherit: [],
    release: () => undefined,
  };
  spawnSession(session, { plan, env: {}, timeoutSec: job.timeoutSec, killGraceMs: job.killGraceMs, pty: false, cgroup, onCgroupStuck, adopt: job.ends });
}
