import { whenEmpty } from '../cgroup/empty.js';
import { sameResources, type SessionCgroup, type UsageReading } from '../cgroup/session.js';
import type { Resources, Session } from '../session/session.js';
import { signalGroup } from './group.js';
import { readStat } from './procfs.js';
import { samplingThread, usageAt } from './sample-thread.js';
import { samplerTiming, UsageSampler, type Walkable } from './usage.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The cgroup of each session that has one (runner/start.ts makes it, runner/spawn.ts gives it here). */
const cgroups = new WeakMap<Session, SessionCgroup>();

/** Counts the cgroups given: a session that gains one is measured from then on (`runningUsage`). */
let given = 0;

export function giveCgroup(session: Session, cg: SessionCgroup): void {
  cgroups.set(session, cg);
  given++;
}

export function cgroupOf(session: Session): SessionCgroup | undefined {
  return cgroups.get(session);
}

/**
 * Running sessions' figures, one held sample each while they are asked for (runner/usage.ts). A
 * sample read again with the same figures stays the object it was, so a list made from it is
 * not made again (tools/process/list.ts).
 */
const usage = new UsageSampler<Session>(
  (s) => cgroups.get(s)!.resources(),
  (s) => s.running,
  // On the daemon's thread (first reads, and refreshes where the samplers' thread cannot run) 3%
  // of it; the ports sampler has the other 2% of the samplers' 5%. On the samplers' thread 15% of
  // a core, and the ports 10%: together at most a quarter of one core (docs/benchmarks.md).
  samplerTiming(0.03, 'usage', 0.15),
  sameResources,
  {
    // The refresh's reads on the samplers' thread (runner/sample-thread.ts); each session's part of a sample is made here.
    read: (sessions, ids, fresh) =>
      samplingThread.usage(ids, fresh, (i) => cgroups.get(sessions[i])!.usagePlan())?.then((b) => ({
        cpuMs: b.cpuMs,
        sample: (i: number, held: Resources) => (usageAt(b.figures, i, reading) ? cgroups.get(sessions[i])?.fromReading(reading, false, 0, held) : undefined),
      })),
  },
);

/**
 * Hold a usage sample of each running session of `sessions` that has a cgroup, reading the ones
 * not held a few per turn (UsageSampler.hold): undefined when all were at hand, else a promise
 * to wait for before asking sessionResources.
 */
export function holdResources(sessions: Walkable<Session>): Promise<void> | undefined {
  return usage.hold(sessions, measured);
}

const measured = (s: Session) => s.running && cgroups.has(s);

/** One reading at a time is made a sample (SessionCgroup.fromReading keeps nothing of it): one object for them all. */
const reading: UsageReading = { cpuMs: 0, memoryBytes: 0 };

/** The sessions `runningUsage` adds up: a walk, and a count of the changes to which there are and which run. */
export interface RunningSessions extends Walkable<Session> {
  readonly version: number;
}

/** What the running sessions use together, and how many sessions that covers. */
export interface RunningUsage {
  sessions: number;
  cpuMs: number;
  memoryBytes: number;
  processes: number;
}

/** The last totals made, and what they were made from. */
let totals: { of: RunningSessions; sessions: number; samples: number; cgroups: number; value: RunningUsage } | undefined;

/**
 * What the running sessions use together (CPU time, memory now, processes), from the samples held
 * while they are asked for; a promise while samples not held yet (the first ask after a quiet
 * spell) are read, a few per turn. daemon.status asks it, and some clients ask status after every
 * poll: while no session came, went, started or stopped and no sample was read anew (once a second
 * while asked), the totals made last are the answer, and every sample counts as asked without a
 * walk of a thousand sessions (two walks took 55 µs of a 96 µs status at 1,000 sessions, and touched
 * every session's object: docs/benchmarks.md).
 */
export function runningUsage(sessions: RunningSessions): RunningUsage | Promise<RunningUsage> {
  const t = totals;
  if (t !== undefined && t.of === sessions && t.sessions === sessions.version && t.samples === usage.version && t.cgroups === given) {
    usage.askAll();
    return t.value;
  }
  const reading = usage.hold(sessions, measured);
  return reading ? reading.then(() => addUp(sessions)) : addUp(sessions);
}

function addUp(sessions: RunningSessions): RunningUsage {
  const value = { sessions: 0, cpuMs: 0, memoryBytes: 0, processes: 0 };
  // By the walk's forEach: a for…of over an iterator makes a result object per session where the
  // optimizer does not take them away (up to 40 kB a status at 1,000 sessions).
  sessions.forEach((s) => {
    if (!s.running) return;
    const r = sessionResources(s);
    if (!r) return;
    value.sessions++;
    value.cpuMs += r.cpuMs;
    value.memoryBytes += r.memoryBytes;
    value.processes += r.processes;
  });
  // Taken after the walk: a sample it read first (sessionResources) is in these totals.
  totals = { of: sessions, sessions: sessions.version, samples: usage.version, cgroups: given, value };
  return value;
}

/**
 * Moves whenever a usage sample is held, let go or made anew, a session is given its cgroup, or a
 * refresh begins: equal to one taken before, every sample asked for then is held now, the same,
 * and still counted as asked for (tools/process/list.ts answers a kept page without a walk).
 */
export function usageMark(): number {
  return usage.mark + given;
}

/** The usage sample held for a running session, if one is (a restart hands it to the next image). */
export function heldResources(session: Session): Resources | undefined {
  return usage.peek(session);
}

/** Hold a sample the image before this one read (handover/in.ts); only for a session with its cgroup. */
export function seedResources(session: Session, sample: Resources): void {
  if (session.running && cgroups.has(session)) usage.seed(session, sample);
}

/** What a session has used: its held sample while it runs, its final figures (read at its end) once it ended. */
export function sessionResources(session: Session): Resources | undefined {
  if (!session.running) return session.resources;
  return cgroups.has(session) ? usage.of(session) : undefined;
}

/** Wait until nothing of any of these cgroups is alive (told by the kernel where it can), or the time runs out; which are still populated. */
export async function waitCgroupsEmpty(list: readonly SessionCgroup[], withinMs: number): Promise<boolean[]> {
  const empty = await Promise.all(list.map((cg) => whenEmpty(cg, withinMs)));
  return empty.map((e) => !e);
}

/**
 * Deliver a stop signal to every process of a session's cgroup, once each: to its process group
 * as a whole, and to each member that left the group (setsid, a double fork) by itself.
 */
function signalMembers(cg: SessionCgroup, pgid: number | undefined, signal: NodeJS.Signals): void {
  // SIGKILL is what the cgroup's kill sends, once to each member, without reading each member's group while they die.
  if (signal === 'SIGKILL') return cg.kill();
  if (pgid !== undefined) signalGroup(pgid, signal);
  for (const pid of cg.members()) {
    if (pgid !== undefined && readStat(pid)?.pgrp === pgid) continue;
    try {
      process.kill(pid, signal);
    } catch {
      // gone
    }
  }
}

/** Up to this long for SIGKILLed processes to be gone before the end is reported anyway. */
const KILL_WAIT_MS = 5000;

/**
 * The stop escalation for sessions that have a cgroup: `signal` to every process in it, up to
 * `graceMs` for them to go, then `cgroup.kill` (repeated until the cgroup is empty). A frozen
 * session is thawed first, so its job sees the stop signal as it would unpaused. Returns, per
 * target, whether the kill was needed.
 */
export async function terminateCgroups(
  targets: { cg: SessionCgroup; pgid: number | undefined; session?: Session }[],
  signal: NodeJS.Signals,
  graceMs: number,
  onEscalate: (index: number) => void = () => undefined,
): Promise<boolean[]> {
  for (const t of targets) {
    if (t.session?.paused) {
      t.cg.thaw();
      t.session.unpause();
    }
  }
  const initially = targets.map((t) => t.cg.populated());
  targets.forEach((t, i) => initially[i] && signalMembers(t.cg, t.pgid, signal));
  const stubborn = await waitCgroupsEmpty(targets.map((t) => t.cg), graceMs);
  const killed = targets.map((_, i) => initially[i] && stubborn[i]);
  if (killed.includes(true)) {
    killed.forEach((k, i) => k && onEscalate(i));
    const left = targets.filter((_, i) => killed[i]).map((t) => t.cg);
    const deadline = Date.now() + KILL_WAIT_MS;
    for (let live = left; live.length > 0 && Date.now() < deadline; ) {
      for (const cg of live) cg.kill();
      const still = await waitCgroupsEmpty(live, 100);
      live = live.filter((_, i) => still[i]);
    }
  }
  return killed;
}

/** Removals of ended sessions' cgroups under way (the daemon waits for them before it removes its own subtree). */
const removing = new Set<Promise<void>>();

/**
 * After a session's end, its cgroup goes, off the event loop: at once when empty, else once the
 * last process is gone (a few tries, with cgroup.kill for what is still there).
 */
export function removeCgroupWhenEmpty(cg: SessionCgroup, onStuck: (dirs: string[]) => void = () => undefined): void {
  const done = (async () => {
    // After this turn: the exec that waits for this end answers first (the removal is handed to a thread, which wakes it).
    await new Promise<void>((resolve) => setImmediate(resolve));
    if (await cg.removeLater()) return;
    for (let i = 0; i < 20; i++) {
      await sleep(50 * (i + 1));
      if (cg.populated()) cg.kill();
      else if (await cg.removeLater()) return;
    }
    onStuck(cg.dirs());
  })();
  removing.add(done);
  void done.finally(() => removing.delete(done));
}

/** Once every removal begun so far has ended. */
export async function cgroupRemovalsSettled(): Promise<void> {
  await Promise.all([...removing]);
}

/** How long a freeze may take before pause answers that it did not hold. */
const FREEZE_WAIT_MS = 2000;

/**
 * Pause a running session: freeze its cgroup, wait until the kernel says every process is
 * frozen, and mark the session paused. Returns why it could not, if it could not.
 */
export async function pauseSession(session: Session): Promise<string | undefined> {
  const cg = cgroups.get(session);
  if (!cg) return 'it has no cgroup to freeze';
  if (session.paused) return undefined;
  if (!cg.freeze()) return 'its cgroup refused the freeze';
  const deadline = Date.now() + FREEZE_WAIT_MS;
  let pause = 1;
  while (!cg.frozen() && cg.populated()) {
    if (Date.now() > deadline) {
      cg.thaw();
      return `its processes did not all freeze within ${FREEZE_WAIT_MS} ms`;
    }
    await sleep(pause);
    pause = Math.min(pause * 2, 50);
  }
  if (session.running) session.pause();
  else cg.thaw();
  return undefined;
}

/** Continue a paused session: thaw its cgroup. */
export function continueSession(session: Session): string | undefined {
  const cg = cgroups.get(session);
  if (!cg) return 'it has no cgroup';
  if (!cg.thaw()) return 'its cgroup refused the thaw';
  session.unpause();
  return undefined;
}
