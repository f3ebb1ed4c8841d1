import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { alive, PROCCTLD, waitFor } from './daemon.js';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';

/** The process group of a pid, or undefined once it is gone. */
function pgrpOf(pid: number): { pgrp: number; state: string } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0], pgrp: Number(rest[2]) };
  } catch {
    return undefined;
  }
}

/** Every live (non-zombie) process, by process group, from one scan of /proc. */
function liveByGroup(): Map<number, number[]> {
  const groups = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const st = pgrpOf(Number(entry));
    if (!st || st.state === 'Z' || st.state === 'X') continue;
    const members = groups.get(st.pgrp);
    if (members) members.push(Number(entry));
    else groups.set(st.pgrp, [Number(entry)]);
  }
  return groups;
}

/** Live (non-zombie) processes in process group `pgid`. */
export function groupMembers(pgid: number): number[] {
  return liveByGroup().get(pgid) ?? [];
}

/**
 * Which of these pids, or of the process groups they lead, are still alive. Every session leads
 * its own group, so a session pid stands for everything the session started inside it.
 */
export function leftovers(pids: Iterable<number>): number[] {
  const groups = liveByGroup();
  const live = new Set<number>();
  for (const pid of pids) {
    if (alive(pid)) live.add(pid);
    for (const m of groups.get(pid) ?? []) live.add(m);
  }
  return [...live];
}

/** Wait until none of the pids (or their groups) is alive; returns what is left on timeout. */
export async function waitGone(pids: Iterable<number>, timeoutMs = 10_000): Promise<number[]> {
  const list = [...pids];
  try {
    await waitFor(() => leftovers(list).length === 0, { timeoutMs, what: 'processes to be gone' });
  } catch {
    // reported by the caller's assertion
  }
  return leftovers(list);
}

export interface RawDaemon {
  proc: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  /** Resolves with the exit code (or the signal name) once it has exited. */
  exited: Promise<number | string | null>;
}

const raw = new Set<RawDaemon>();

/** Spawn bin/procctld with exactly these args and env (for start-up cases startDaemon does not cover). */
export function spawnProcctld(args: string[], env: Record<string, string | undefined>): RawDaemon {
  // As startDaemon: a test that kills the daemon expects its sessions killed with it, unless it asks for "keep".
  const full: NodeJS.ProcessEnv = { ...process.env, PROCCTL_LOG_LEVEL: 'warn', PROCCTL_ON_CRASH: 'kill' };
  delete full.PROCCTL_SOCKET;
  Object.assign(full, env);
  for (const [k, v] of Object.entries(env)) if (v === undefined) delete full[k];
  const proc = spawn(process.execPath, [...DAEMON_NODE_FLAGS, PROCCTLD, ...args], { env: full, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  proc.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<number | string | null>((r) => proc.on('exit', (code, signal) => r(code ?? signal)));
  const d: RawDaemon = { proc, stdout: () => out, stderr: () => err, exited };
  raw.add(d);
  void exited.then(() => raw.delete(d));
  return d;
}

/** Stop whatever spawnProcctld started and is still running. */
export async function stopRawDaemons(): Promise<void> {
  await Promise.all(
    [...raw].map(async (d) => {
      d.proc.kill('SIGTERM');
      const t = setTimeout(() => d.proc.kill('SIGKILL'), 15_000);
      await d.exited;
      clearTimeout(t);
    }),
  );
}

/** True if the process runs with a procctl session environment (so it is one of ours, not a reused pid). */
function startedBySession(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').includes('PROCCTL_SESSION_ID=');
  } catch {
    return false;
  }
}

/**
 * Clean up after a failed assertion: SIGKILL, by pid, whatever of these is still alive and was
 * started by a procctl session. Returns what it killed.
 */
export function killLeftovers(pids: Iterable<number>): number[] {
  const killed: number[] = [];
  for (const pid of leftovers(pids)) {
    if (!startedBySession(pid)) continue;
    try {
      process.kill(pid, 'SIGKILL');
      killed.push(pid);
    } catch {
      // already gone
    }
  }
  return killed;
}

/** Live direct children of a process (from /proc; zombies excluded). */
export function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      if (Number(rest[1]) === ppid && rest[0] !== 'Z' && rest[0] !== 'X') out.push(Number(entry));
    } catch {
      // gone
    }
  }
  return out;
}
