import { readdirSync, readFileSync } from 'node:fs';

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

/** Parse `/proc/PID/stat`: the state letter and the process group. */
export function readStat(pid: number): { state: string; pgrp: number; ppid: number; startTime: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: rest[0], ppid: Number(rest[1]), pgrp: Number(rest[2]), startTime: Number(rest[19]) };
}

/**
 * Processes of the group that are still alive. Zombies do not count: where PID 1 does not reap
 * orphans (containers, some sandboxes) a dead member stays a zombie, and `kill(-pgid, 0)`
 * still succeeds for it.
 */
export function liveGroupMembers(pgid: number): number[] {
  if (!signalGroup(pgid, 0)) return [];
  const live: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const c = entry.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const stat = readStat(Number(entry));
    if (stat && stat.pgrp === pgid && stat.state !== 'Z' && stat.state !== 'X') live.push(Number(entry));
  }
  return live;
}

/** Processes a stop is after: the session's group, and single processes that left it. */
export interface StopTarget {
  pgid: number | undefined;
  pids: number[];
}

function liveCount(t: StopTarget): number {
  let n = 0;
  if (t.pgid !== undefined) n += liveGroupMembers(t.pgid).length;
  for (const pid of t.pids) {
    const stat = readStat(pid);
    if (stat && stat.state !== 'Z' && stat.state !== 'X') n++;
  }
  return n;
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

/** Wait until nothing of the target is alive, or the time runs out; true when gone. */
export async function waitGone(t: StopTarget, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  let pause = 2;
  for (;;) {
    if (liveCount(t) === 0) return true;
    const left = deadline - Date.now();
    if (left <= 0) return false;
    await sleep(Math.min(pause, left));
    pause = Math.min(pause * 2, 50);
  }
}

export const waitGroupGone = (pgid: number, withinMs: number) => waitGone({ pgid, pids: [] }, withinMs);

/**
 * The escalation every stop goes through: `signal` to the group (and to each process that left
 * it), up to `graceMs` for them to go, then SIGKILL and a last wait. Returns whether SIGKILL was
 * needed.
 */
export async function terminate(t: StopTarget, signal: NodeJS.Signals, graceMs: number): Promise<{ killed: boolean }> {
  if (liveCount(t) === 0) return { killed: false };
  signalTarget(t, signal);
  if (await waitGone(t, graceMs)) return { killed: false };
  signalTarget(t, 'SIGKILL');
  await waitGone(t, 5000);
  return { killed: true };
}
