import { join } from 'node:path';
import { SessionCgroup } from '../cgroup/session.js';
import type { CgroupLayout, V1Name } from '../cgroup/host.js';
import type { Rlimit } from '../sandbox/limits.js';
import type { LaunchPlan } from '../sandbox/plan.js';
import type { Session } from '../session/session.js';
import { conflict } from '../base/errors.js';
import type { PipeEnds } from './launch/pipes.js';
import type { TerminalEnds } from './launch/types.js';
import { nativeSpawner } from './native.js';
import { EXIT_STATUS_FILE, holdWiring, spawnSession, wiringOf } from './spawn.js';
import { JobEnv } from './env.js';
import { channelsOf, type CarriedChannel, type CarriedCredential, type SessionChannels } from './start.js';
import type { NetworkPolicy } from '../config/schema.js';

/** What the runner holds of a running session that a restart hands to the next image (SPEC §19). */
export interface HandedJob {
  ends: PipeEnds | TerminalEnds;
  /** Input written to the job that this image still held (it is said, not sent). */
  stdinQueued: number;
  timeoutSec: number;
  killGraceMs: number;
  limits: Rlimit[];
  cgroup?: { v2?: string; v1: Partial<Record<V1Name, string>> };
  /** Under bwrap: its status reads 128+N for a signal, and its namespace's init says when it is all gone. */
  sandboxed?: boolean;
  /** Its channels back to the daemon (daemon/channel.ts): the checkpoint channel, and the network-by-name proxy's port. */
  channels?: { checkpoint?: CarriedChannel; proxy?: CarriedChannel & { policy: Pick<Exclude<NetworkPolicy, boolean>, 'allow' | 'deny'>; credentials?: CarriedCredential[] } };
}

/**
 * Why this running session cannot be handed to a new image now, in words; undefined when it can.
 * A session already ending is this image's to finish: a restart with one is refused, and the old
 * image goes on serving.
 */
export function cannotHandOver(s: Session): string | undefined {
  const w = wiringOf(s);
  if (!w || !w.launched) return 'it was not started by this daemon image';
  if (w.exited || s.stopping) return 'it is ending (its leader exited or a stop is under way)';
  if (!w.launched.ends?.() || !w.launched.holdOutput) return s.pty ? 'its terminal is closing' : 'it was started by fork, without the addon';
  return undefined;
}

/** What a session needs the next image to carry besides pipes (`procctld --handover-format` names what it carries). */
export function carryNeeds(s: Session): string[] {
  const ch = channelsOf(s);
  return [...(s.pty ? ['terminal'] : []), ...(s.pty && tapOf(s) ? ['terminal-tap'] : []), ...(wiringOf(s)?.sandboxed || ch.checkpoint || ch.proxy ? ['sandbox'] : []), ...(s.changes?.state === 'running' ? ['review'] : []), ...(ch.credentials ? ['credentials'] : [])];
}

/** A terminal session's tap pipe (runner/launch/tap.ts), where its output goes through one. */
function tapOf(s: Session): TerminalEnds['tap'] {
  const ends = wiringOf(s)?.launched?.ends?.();
  return ends && 'terminal' in ends ? ends.tap : undefined;
}

/**
 * Keep node-pty from reaping the terminal sessions' leaders until the exec (native/terminal.c
 * parkWaiters): node-pty waits for each on a thread of its own, and an exit it reaped in the old
 * image's last moment would be lost to the new one. Refuses (conflict, retryable) when a leader was
 * reaped already: its exit is on its way to this image, which finishes the session.
 */
export function parkTerminals(sessions: readonly Session[]): () => void {
  // Terminals this image adopted are reaped by its own reaper, which the last step froze already.
  const pids = sessions.filter((s) => s.pid !== undefined && wiringOf(s)?.launched?.reapedByThread).map((s) => s.pid!);
  if (pids.length === 0) return () => undefined;
  const addon = nativeSpawner();
  if (addon instanceof Error || !addon.parkWaiters || !addon.unparkWaiters) throw conflict('this build of the addon cannot hold a terminal session\'s exit across a restart (parkWaiters); rebuild it (node scripts/build-addon.mjs) and restart the daemon');
  const unpark = addon.unparkWaiters.bind(addon);
  let parked: number[];
  try {
    parked = addon.parkWaiters(pids);
  } catch (err) {
    unpark();
    throw err;
  }
  const missed = pids.filter((p) => !parked.includes(p));
  if (missed.length > 0) {
    unpark();
    throw conflict(`the leader of a terminal session ended during the hand-over (pid ${missed.join(', ')}); nothing was restarted, try again`);
  }
  return unpark;
}

/** Stop reading every session's output until the returned resume (a restart's quiet moment). */
export function holdOutputs(sessions: readonly Session[]): () => void {
  const resumes = sessions.map((s) => {
    holdWiring(s, true);
    const resume = wiringOf(s)?.launched?.holdOutput?.() ?? (() => undefined);
    const ch = channelsOf(s);
    const channels = [ch.checkpoint?.hold?.(), ch.proxy?.hold?.()];
    return () => {
      holdWiring(s, false);
      resume();
      for (const again of channels) again?.();
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
    ...(w.sandboxed ? { sandboxed: true } : {}),
    ...carriedChannels(channelsOf(s)),
  };
}

function carriedChannels(ch: SessionChannels): Pick<HandedJob, 'channels'> {
  const checkpoint = ch.checkpoint?.carry?.();
  const proxy = ch.proxy?.carry?.();
  if (!checkpoint && !proxy) return {};
  return { channels: { ...(checkpoint ? { checkpoint } : {}), ...(proxy && ch.policy ? { proxy: { ...proxy, policy: { allow: ch.policy.allow, deny: ch.policy.deny }, ...(ch.credentials ? { credentials: ch.credentials.map((c) => ({ ...c, hosts: [...c.hosts] })) } : {}) } } : {}) } };
}

/** The descriptors of a handed job, which must survive the exec. */
export function handedDescriptors(job: HandedJob): number[] {
  const ch = job.channels;
  const channels = [ch?.checkpoint?.control, ch?.proxy?.control, ...(ch?.proxy?.listeners ?? []), job.ends.pidfd].filter((fd): fd is number => fd !== undefined && fd >= 0);
  if ('terminal' in job.ends) return [job.ends.terminal, ...(job.ends.tap ? [job.ends.tap.read, ...(job.ends.tap.write !== undefined ? [job.ends.tap.write] : [])] : []), ...channels];
  return [...channels, job.ends.stdout, job.ends.stderr, ...(job.ends.stdin >= 0 ? [job.ends.stdin] : [])];
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
    sandboxed: job.sandboxed ?? false,
    limits: job.limits,
    notes: [],
    inherit: [],
    release: () => undefined,
  };
  const exitFile = job.sandboxed && session.tmpdir ? join(session.tmpdir, EXIT_STATUS_FILE) : undefined;
  spawnSession(session, { plan, env: JobEnv.empty(), timeoutSec: job.timeoutSec, killGraceMs: job.killGraceMs, pty: false, cgroup, onCgroupStuck, adopt: job.ends, ...(exitFile ? { exitFile } : {}) });
}
