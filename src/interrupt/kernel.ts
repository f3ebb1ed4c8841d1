import { closeSync, openSync, readSync } from 'node:fs';
import { nativeSpawner } from '../runner/native.js';
import { fdTarget } from '../runner/procfs.js';

/** Syscall numbers that block reading one fd (first argument), per architecture. */
const READS: Record<string, number[]> = { x64: [0, 17, 19], arm64: [63, 65, 67] };
/** Syscalls that wait on several fds (poll, select, epoll): the fds are not visible here. */
const WAITS: Record<string, number[]> = { x64: [7, 23, 232, 270, 271, 281], arm64: [22, 72, 73] };

const reads = new Set(READS[process.arch] ?? []);
const waits = new Set(WAITS[process.arch] ?? []);

/** One buffer for all the small /proc reads: the watcher runs often, so it should not allocate. */
const scratch = Buffer.allocUnsafe(4096);

/** A small /proc file as text, or undefined if it cannot be read. */
function readSmall(path: string): string | undefined {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    const n = readSync(fd, scratch, 0, scratch.length, null);
    return scratch.toString('latin1', 0, n);
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** The syscall a process is blocked in and its first argument, from /proc/PID/syscall. */
function blockedIn(pid: number): { nr: number; arg0: number } | undefined {
  const text = readSmall(`/proc/${pid}/syscall`);
  if (text === undefined) return undefined;
  const [nr, arg0] = text.split(' ', 2);
  if (nr === 'running' || arg0 === undefined) return undefined;
  return { nr: Number(nr), arg0: Number(arg0) };
}

function children(pid: number): number[] {
  const text = readSmall(`/proc/${pid}/task/${pid}/children`);
  return text ? text.split(' ').filter(Boolean).map(Number) : [];
}

export interface StdinReader {
  pid: number;
  /** `read`: blocked reading the session's input itself; `wait`: in poll/select with it as fd 0. */
  how: 'read' | 'wait';
}

/**
 * Is a process of the session's tree blocked reading the session's own input (`stdinId`, what
 * the leader's fd 0 pointed at)? Walks the tree from the leader through /proc children links,
 * reading two small files per process: cheap enough to run for each quiet session.
 */
export function findStdinReader(leader: number, stdinId: string, pty: boolean, maxProcesses = 64): StdinReader | undefined {
  // On a terminal, a program may also read its controlling tty directly (sudo, ssh, gpg do).
  const isInput = (target: string | undefined) => target === stdinId || (pty && target === '/dev/tty');
  const queue = [leader];
  let waiting: StdinReader | undefined;
  for (let seen = 0; queue.length > 0 && seen < maxProcesses; seen++) {
    const pid = queue.shift()!;
    const call = blockedIn(pid);
    if (call && reads.has(call.nr) && isInput(fdTarget(pid, call.arg0))) return { pid, how: 'read' };
    if (call && waits.has(call.nr) && !waiting && isInput(fdTarget(pid, 0))) waiting = { pid, how: 'wait' };
    queue.push(...children(pid));
  }
  return waiting;
}

/** One session to look at: its leader and what the leader's fd 0 pointed at. */
export interface ReaderQuery {
  leader: number;
  stdinId: string;
  pty: boolean;
}

/** Whether findStdinReaders reads /proc off the event loop (the addon has the function). */
export function readsOffLoop(): boolean {
  const addon = nativeSpawner();
  return !(addon instanceof Error) && addon.stdinReaders !== undefined;
}

/**
 * A look the addon's idle thread has not answered in this long runs on the libuv pool as well.
 * The thread runs only when a core has nothing else to run: on a machine whose every core is
 * busy it can wait for seconds (docs/benchmarks.md, "The looks on a thread of idle priority").
 */
export const LOOK_LATE_MS = 100;

/** Where the addon runs the looks (see Addon.lookThread); undefined without the addon or before the first look. */
export function lookThread(): { state: 'none' | 'thread' | 'pool'; why?: string; policy?: string } | undefined {
  const addon = nativeSpawner();
  return addon instanceof Error ? undefined : addon.lookThread?.();
}

/**
 * `findStdinReader` for many sessions at once, answered in the same order. With the addon
 * (native/spawn.c) the /proc reads run on a thread of idle priority, so a crowd of quiet
 * sessions costs the event loop nothing and never takes its core from it (on the libuv pool
 * when that thread cannot be made, or has not answered in LOOK_LATE_MS); without it (not
 * built, or PROCCTL_SPAWN=node) they run here, synchronously, as they always did.
 */
export async function findStdinReaders(queries: readonly ReaderQuery[]): Promise<(StdinReader | undefined)[]> {
  const addon = nativeSpawner();
  if (!(addon instanceof Error) && addon.stdinReaders !== undefined) {
    let answers: number[] | undefined;
    let late: NodeJS.Timeout | undefined;
    try {
      const asked = addon.stdinReaders(queries.map((q) => [q.leader, q.stdinId, q.pty]));
      if (addon.stdinReadersLate) late = setTimeout(() => addon.stdinReadersLate?.(), LOOK_LATE_MS).unref();
      answers = await asked;
    } catch {
      // The look could not run there (cancelled, out of memory): run it here this once.
    } finally {
      clearTimeout(late);
    }
    if (answers) return answers.map((a): StdinReader | undefined => (a > 0 ? { pid: a, how: 'read' } : a < 0 ? { pid: -a, how: 'wait' } : undefined));
  }
  return queries.map((q) => findStdinReader(q.leader, q.stdinId, q.pty));
}
