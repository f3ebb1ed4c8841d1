import { readdirSync } from 'node:fs';
import { readStat } from './procfs.js';

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Send a signal to every process of a group; a group that is already gone is not an error. */
export function signalGroup(pgid: number, signal: NodeJS.Signals | 0): boolean {
  try {
    process.kill(-pgid, signal);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ESRCH') return false;
    throw err;
  }
}

const isLive = (state: string) => state !== 'Z' && state !== 'X';

/** Live members of each group, from one pass over /proc. */
function scanGroups(pgids: ReadonlySet<number>): Map<number, number[]> {
  const members = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    const c = entry.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const stat = readStat(Number(entry));
    if (!stat || !pgids.has(stat.pgrp) || !isLive(stat.state)) continue;
    const list = members.get(stat.pgrp) ?? [];
    list.push(Number(entry));
    members.set(stat.pgrp, list);
  }
  return members;
}

/**
 * Processes of the group that are still alive. Zombies do not count: where PID 1 does not reap
 * orphans (containers, some sandboxes) a dead member stays a zombie, and `kill(-pgid, 0)`
 * still succeeds for it.
 */
export function liveGroupMembers(pgid: number): number[] {
  if (!signalGroup(pgid, 0)) return [];
  return scanGroups(new Set([pgid])).get(pgid) ?? [];
}

/** Processes a stop is after: the session's group, and single processes that left it. */
export interface StopTarget {
  pgid: number | undefined;
  pids: number[];
}

/** How many processes of each target are alive: the kernel's answer first, /proc only when it is unsure. */
function liveCounts(targets: StopTarget[]): number[] {
  const unsure = new Set<number>();
  for (const t of targets) if (t.pgid !== undefined && signalGroup(t.pgid, 0)) unsure.add(t.pgid);
  const groups = unsure.size ? scanGroups(unsure) : new Map<number, number[]>();
  return targets.map((t) => {
    let n = t.pgid !== undefined ? (groups.get(t.pgid)?.length ?? 0) : 0;
    for (const pid of t.pids) {
      const stat = readStat(pid);
      if (stat && isLive(stat.state) && stat.pgrp !== t.pgid) n++;
    }
    return n;
  });
}

function signalTarget(t: StopTarget, signal: NodeJS.Signals): void {
  if (t.pgid !== undefined) signalGroup(t.pgid, signal);
  for (const pid of t.pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}

/** Wait until nothing of any target is alive, or the time runs out; which targets still live. */
async function waitAllGone(targets: StopTarget[], withinMs: number): Promise<boolean[]> {
  const deadline = Date.now() + withinMs;
  let pause = 2;
  for (;;) {
    const live = liveCounts(targets).map((n) => n > 0);
    if (!live.includes(true)) return live;
    const left = deadline - Date.now();
    if (left <= 0) return live;
    await sleep(Math.min(pause, left));
    pause = Math.min(pause * 2, 50);
  }
}

export async function waitGroupGone(pgid: number, withinMs: number): Promise<boolean> {
  const [live] = await waitAllGone([{ pgid, pids: [] }], withinMs);
  return !live;
}

/**
 * The escalation every stop goes through, for many sessions at once: `signal` to each group (and
 * to each process that left it), up to `graceMs` for them to go, then SIGKILL and a last wait.
 * Liveness is checked for all targets together, so stopping a hundred sessions costs about what
 * stopping one does. Returns, per target, whether SIGKILL was needed.
 */
export async function terminateAll(
  targets: StopTarget[],
  signal: NodeJS.Signals,
  graceMs: number,
  onEscalate: (index: number) => void = () => undefined,
): Promise<boolean[]> {
  const initially = liveCounts(targets).map((n) => n > 0);
  targets.forEach((t, i) => initially[i] && signalTarget(t, signal));
  const stubborn = await waitAllGone(targets, graceMs);
  const killed = targets.map((_, i) => initially[i] && stubborn[i]);
  if (killed.includes(true)) {
    // Said before the SIGKILL lands, so a record that shows the session ended is already complete.
    killed.forEach((k, i) => k && onEscalate(i));
    targets.forEach((t, i) => killed[i] && signalTarget(t, 'SIGKILL'));
    await waitAllGone(targets, 5000);
  }
  return killed;
}

export async function terminate(t: StopTarget, signal: NodeJS.Signals, graceMs: number): Promise<{ killed: boolean }> {
  const [killed] = await terminateAll([t], signal, graceMs);
  return { killed };
}
