import { readdirSync, readFileSync } from 'node:fs';
import { terminate } from './group.js';
import { readStat } from './procfs.js';

const MARKER = 'PROCCTL_SESSION_ID=';

export interface Straggler {
  pid: number;
  pgrp: number;
}

/** Numeric entries of /proc: every process visible to us. */
function pids(): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    const c = entry.charCodeAt(0);
    if (c >= 48 && c <= 57) out.push(Number(entry));
  }
  return out;
}

/** The session id a process inherited in its environment, if any. */
export function sessionMarker(pid: number): string | undefined {
  let env: string;
  try {
    env = readFileSync(`/proc/${pid}/environ`, 'latin1');
  } catch {
    return undefined; // gone, or not ours
  }
  const at = env.indexOf(MARKER);
  if (at === -1 || (at > 0 && env.charCodeAt(at - 1) !== 0)) return undefined;
  const end = env.indexOf('\0', at);
  return env.slice(at + MARKER.length, end === -1 ? undefined : end);
}

/**
 * Every live process that carries one of these sessions' marker in its environment. Each session
 * exports PROCCTL_SESSION_ID at spawn and every descendant inherits it, so this finds what left
 * the process group too (setsid, double fork) — from one pass over /proc for all sessions.
 */
export function findSessionProcesses(ids: ReadonlySet<string>, startedFrom = 0): Map<string, Straggler[]> {
  const found = new Map<string, Straggler[]>();
  if (ids.size === 0) return found;
  const from = pidsWrappedSince(startedFrom) ? 0 : startedFrom;
  for (const pid of pids()) {
    // A session's processes were all created after its leader, so older PIDs need no look.
    if (pid < from || pid === process.pid) continue;
    const id = sessionMarker(pid);
    if (id === undefined || !ids.has(id)) continue;
    const stat = readStat(pid);
    if (!stat || stat.state === 'Z' || stat.state === 'X') continue;
    const list = found.get(id) ?? [];
    list.push({ pid, pgrp: stat.pgrp });
    found.set(id, list);
  }
  return found;
}

/**
 * Did the kernel's PID counter wrap since `pid` was handed out? Then PIDs say nothing about age.
 * (ns_last_pid is the last PID given; below `pid` means it went round.)
 */
function pidsWrappedSince(pid: number): boolean {
  if (pid <= 0) return false;
  try {
    return Number(readFileSync('/proc/sys/kernel/ns_last_pid', 'latin1')) < pid;
  } catch {
    return true;
  }
}

/** Sessions younger than this cannot have seen the PID counter go all the way round. */
const YOUNG_MS = 60_000;

/**
 * Where a search for these sessions' processes can start: the lowest leader PID, when every
 * session is young enough that no PID given since can be lower; else 0 (search everything).
 */
export function oldestLeader(sessions: { pid: number | undefined; startedAt: number }[], now = Date.now()): number {
  let from = Infinity;
  for (const s of sessions) {
    if (s.pid === undefined) continue; // never started: nothing to find
    if (now - s.startedAt > YOUNG_MS) return 0;
    from = Math.min(from, s.pid);
  }
  return from === Infinity ? 0 : from;
}

export function signalPids(pids: number[], signal: NodeJS.Signals): void {
  for (const pid of pids) {
    try {
      process.kill(pid, signal);
    } catch {
      // already gone
    }
  }
}


const afterExit = new Map<string, { graceMs: number; pid: number | undefined; startedAt: number }>();
let sweepTimer: NodeJS.Timeout | undefined;
let onStragglers: (sessionId: string, pids: number[]) => void = () => undefined;

/** Where the daemon hears of processes a finished session left outside its group. */
export function setStragglerListener(fn: (sessionId: string, pids: number[]) => void): void {
  onStragglers = fn;
}

/**
 * After a session ends by itself, look once more (batched, off the exec path) for processes
 * that left its group — a `setsid cmd &` — and stop them: no process outlives its session.
 */
export function sweepAfterExit(sessionId: string, pid: number | undefined, startedAt: number, graceMs: number): void {
  afterExit.set(sessionId, { graceMs, pid, startedAt });
  sweepTimer ??= setTimeout(runSweep, 50);
}

function runSweep(): void {
  sweepTimer = undefined;
  const batch = new Map(afterExit);
  afterExit.clear();
  const from = oldestLeader([...batch.values()]);
  for (const [id, list] of findSessionProcesses(new Set(batch.keys()), from)) {
    const pids = list.map((p) => p.pid);
    onStragglers(id, pids);
    void terminate({ pgid: undefined, pids }, 'SIGTERM', batch.get(id)?.graceMs ?? 0);
  }
}
