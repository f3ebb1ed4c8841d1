import { constants as os } from 'node:os';
import { addonFix, loadAddon } from '../base/addon.js';
import type { SpawnSteps } from '../sandbox/plan.js';
import { readStat, zombieStatus } from './procfs.js';
import { closeQuietly } from '../base/close-quietly.js';

export type { SpawnSteps };

/** The project's own addon (native/spawn.c): posix_spawn, which does not copy the daemon's memory. */
export interface Addon {
  spawn(file: string, argv: string[], env: readonly string[], cwd: string, stdinNull: boolean, steps?: SpawnSteps): NativeChild;
  reap(pids: number[]): { pid: number; code: number | null; signal: number | null; maxRssBytes?: number }[];
  exited(): number;
  /**
   * For each `[leader, input, pty]`: pid when a process of the leader's tree is blocked reading
   * `input`, -pid when one waits in poll/select with it as fd 0, 0 when none; read off the main
   * thread, on a thread of idle priority (native/spawn.c). Absent from builds older than the function.
   */
  stdinReaders?(looks: [number, string, boolean][]): Promise<number[]>;
  /** Every look still waiting for the idle thread runs on the libuv pool as well; the first answer settles it. How many went. */
  stdinReadersLate?(): number;
  /** Where the looks run: not asked yet, on the idle thread (`policy`: 'idle', or why not), or on the pool (`why`). */
  lookThread?(): { state: 'none' | 'thread' | 'pool'; why?: string; policy?: string };
  /** Whether the looks thread, once made, runs at SCHED_IDLE (by default) or at normal priority (runner/helper-priority.ts). */
  lookThreadIdle?(idle: boolean): void;
  /**
   * The namespaces a review job gets (steps.mounts without enter), made now on a pool thread, as
   * descriptors for steps.mounts.enter; rejected with the step (syscall) and errno that failed.
   * Absent from builds older than the function.
   */
  /** Whether the mount table behind `fd` (an open /proc/self/mountinfo) changed since the last call on it. */
  mountsChanged?(fd: number): boolean;
  prepareMounts?(steps: { mounts: NonNullable<SpawnSteps['mounts']> }): Promise<{ user: number; mnt: number }>;
  /** Replace the process image, keeping the PID (a planned restart, SPEC §19); returns only by throwing. Absent from builds older than it. */
  execImage?(file: string, argv: string[], env: string[]): never;
  /** TIOCSWINSZ on a terminal's master (native/terminal.c): a carried terminal is resized without node-pty. Absent from builds older than it. */
  setWindowSize?(fd: number, cols: number, rows: number): void;
  /**
   * Park the threads node-pty waits for these leaders on (native/terminal.c): the pids returned are
   * still ours to reap and no thread of node-pty can reap them until unparkWaiters or the exec.
   */
  parkWaiters?(pids: number[]): number[];
  unparkWaiters?(): void;
  /** A pidfd (close-on-exec) to `pid` (native/pidfd.c). Absent from builds older than it. */
  pidfdOpen?(pid: number): number;
  /** Where a session's output pipes are spliced (native/splice.c). Absent from builds older than it. */
  spliceTarget?(): SpliceTarget;
  /** Splice a pipe into `target` (or read it, with target set to -1), one `onBatch(n, status)` per batch read back into `buffer`. */
  splicePipe?(fd: number, target: SpliceTarget, buffer: Buffer, onBatch: (n: number, status: number) => void): SplicedHandle;
  /**
   * Move a terminal's output from its master into a pipe by splice(2) (native/tap.c): `master` a
   * descriptor of its own, `pipe` the tap's write end; onEnd(0) once the job's side is closed and
   * all its output moved, onEnd(-errno) when a splice failed otherwise. `faultErrno`, `faultAfter`:
   * a test's failure (PROCCTL_FAULT_TAP), the next splice once so many bytes were moved. Absent from builds older than it.
   */
  tapTerminal?(master: number, pipe: number, onEnd: (status: number) => void, faultErrno?: number, faultAfter?: number): SplicedHandle;
  /** Whether a pseudo-terminal's master splices into a pipe on this kernel: 0, or the errno its splice failed with. */
  tapProbe?(): number;
  /** A pipe for a tap: [read, write], close-on-exec and non-blocking. */
  tapPipe?(): [number, number];
  /** A new descriptor (close-on-exec) for what `fd` is (native/relay.c). */
  dupDescriptor?(fd: number): number;
  /** How the process behind a pidfd ended once someone reaped it (PIDFD_INFO_EXIT, Linux 6.15+), or why that cannot be told. */
  pidfdExit?(fd: number): { code: number | null; signal: number | null } | { why: string; running: boolean };
}

/** Where spliced output goes: a file at an offset, with room for so many bytes; fd -1: read the pipes instead. */
export interface SpliceTarget {
  set(fd: number, offset?: number, room?: number): void;
  /** Where the next spliced byte goes. */
  offset(): number;
}

/** A pipe being spliced: its poll held and let go, or stopped (its descriptor stays open). */
export interface SplicedHandle {
  pause(): void;
  resume(): void;
  close(): void;
}

export interface NativeChild {
  pid: number;
  /** -1 when stdin is /dev/null. */
  stdin: number;
  stdout: number;
  stderr: number;
  /** The inode of the job's fd 0 (`socket:[N]` in /proc), absent with stdin on /dev/null or from builds older than it. */
  stdinInode?: number;
}

/**
 * The leader's status, and the largest resident size of it or of any descendant it waited for
 * (wait4's ru_maxrss). `unknown`: why neither code nor signal could be told (a job adopted after
 * a crash, reaped by its new parent, on a kernel without PIDFD_INFO_EXIT).
 */
export type ExitListener = (code: number | null, signal: string | null, maxRssBytes?: number, unknown?: string) => void;

let addon: Addon | Error | undefined;

/**
 * The addon, or why it cannot be used and what to do: not built and no prebuild for this
 * platform (the install goes on without it when there is no compiler), or turned off with
 * `PROCCTL_SPAWN=node`. Then jobs start through Node's child_process, which forks; see
 * docs/architecture.md.
 */
export function nativeSpawner(): Addon | Error {
  if (addon === undefined) {
    if (process.env.PROCCTL_SPAWN === 'node') addon = new Error('PROCCTL_SPAWN=node is set in the daemon\'s environment');
    else {
      const found = loadAddon<Addon>(['spawn', 'reap', 'exited']);
      addon = found instanceof Error ? new Error(`${found.message}; ${addonFix()}`) : found;
    }
  }
  return addon;
}

/** How jobs on pipes are started: for daemon.status and the logs. */
export function spawnMethod(): 'posix_spawn' | 'fork' {
  return nativeSpawner() instanceof Error ? 'fork' : 'posix_spawn';
}

/** Why jobs start through fork, and the fix; null when the addon is in use. */
export function spawnFallbackReason(): string | null {
  const spawner = nativeSpawner();
  return spawner instanceof Error ? spawner.message : null;
}

/**
 * Start `file` with `argv` in a new session (setsid), stdio on socketpairs (stdin on /dev/null
 * when `stdinNull`), every signal at its default and none blocked; `env` as an object or as
 * NAME=value strings (runner/env.ts JobEnv.pairs). Throws an Error with `code`
 * (ENOENT, EACCES, …) when it cannot start. `onExit` hears the leader's status once.
 */
export function posixSpawn(addon: Addon, file: string, argv: string[], env: NodeJS.ProcessEnv | readonly string[], cwd: string, stdinNull: boolean, onExit: ExitListener, steps?: SpawnSteps): NativeChild {
  const pairs = Array.isArray(env) ? env : envPairs(env as NodeJS.ProcessEnv);
  listen(addon);
  const child = addon.spawn(file, argv, pairs, cwd, stdinNull, steps);
  running.set(child.pid, onExit);
  keepAlive ??= setInterval(reapExited, SAFETY_MS);
  return child;
}

// Our children are reaped here, not by libuv (which waits only for the children it started).
// On SIGCHLD, waitid(WNOWAIT) names an exited child without reaping it: ours are reaped one by
// one, so an exit costs the same with 1,000 jobs running as with one. When the child named is
// not ours (the guardian, a terminal's leader: their owners reap them), every running child of
// ours is asked instead. The listener is added before the first child starts (a signal that
// comes before it is never delivered to it) and stays: taking it off and on again between
// children loses signals. While any child runs, a timer keeps the loop alive, so its exit is
// always heard, and looks once a second (one system call) in case a signal was missed.
const running = new Map<number, ExitListener>();
let reaper: Addon | undefined;
let keepAlive: NodeJS.Timeout | undefined;
const SAFETY_MS = 1000;

/**
 * A child this PID started before a restart (SPEC §19): the old image's children are the new
 * image's, and only this reaper knows them. Its exit may already have happened (a zombie whose
 * SIGCHLD went to the old image), so it is looked for at once.
 */
export function adoptChild(addon: Addon, pid: number, onExit: ExitListener, pidfd?: number): void {
  // A job a crashed daemon started is nobody's child here: its end is watched in /proc instead,
  // and told by its pidfd (kept by the guardian through the crash) once its new parent reaped it.
  const stat = readStat(pid);
  if (stat?.ppid !== process.pid) return watchForeign(pid, stat?.startTime, onExit, pidfd === undefined ? undefined : { addon, fd: pidfd });
  listen(addon);
  running.set(pid, onExit);
  keepAlive ??= setInterval(reapExited, SAFETY_MS);
  setImmediate(reapExited);
}

/**
 * A child of this PID that nothing here follows any more (the last image's guardian, the leader
 * of a session a new image could not take over): reaped once it exits, never left a zombie.
 * Nothing when it is not our child, or the addon (its reaper) cannot be loaded.
 */
export function reapChild(pid: number, onExit: ExitListener = () => undefined): void {
  if (!(pid > 0) || readStat(pid)?.ppid !== process.pid) return;
  const addon = loadAddon<Addon>(['reap', 'exited']);
  if (!(addon instanceof Error)) adoptChild(addon, pid, onExit);
}

/**
 * Stop reaping until `thaw` (a restart's last step): an exit the old image reaped would never
 * reach the new one. The pids still running are handed over; `thaw` undoes it when the restart fails.
 */
export function freezeReaping(): { pids: number[]; thaw: () => void } {
  const was = reaper;
  process.off('SIGCHLD', reapExited);
  clearInterval(keepAlive);
  keepAlive = undefined;
  reaper = undefined;
  return {
    pids: [...running.keys()],
    thaw: () => {
      if (was) listen(was);
      if (running.size > 0) keepAlive ??= setInterval(reapExited, SAFETY_MS);
      setImmediate(reapExited);
    },
  };
}

/** NAME=value for each variable set. */
export function envPairs(env: NodeJS.ProcessEnv): string[] {
  const pairs: string[] = [];
  for (const [k, v] of Object.entries(env)) if (v !== undefined) pairs.push(`${k}=${v}`);
  return pairs;
}

function listen(addon: Addon): void {
  if (reaper) return;
  reaper = addon;
  process.on('SIGCHLD', reapExited);
}

function reapExited(): void {
  if (!reaper || running.size === 0) return;
  for (let pid = reaper.exited(); pid > 0; pid = reaper.exited()) {
    const ours = running.has(pid);
    for (const exit of reaper.reap(ours ? [pid] : [...running.keys()])) report(exit);
    if (!ours) break;
  }
  if (running.size === 0) {
    clearInterval(keepAlive);
    keepAlive = undefined;
  }
}

function report({ pid, code, signal, maxRssBytes }: { pid: number; code: number | null; signal: number | null; maxRssBytes?: number }): void {
  const onExit = running.get(pid);
  running.delete(pid);
  onExit?.(code, signal === null ? null : signalName(signal), maxRssBytes);
}

export function signalName(n: number): string {
  return Object.entries(os.signals).find(([, v]) => v === n)?.[0] ?? `signal ${n}`;
}

/**
 * A pidfd to the leader `pid` of a running session (its first record: the guardian keeps it through
 * a crash), or undefined where there is none to be had (no addon function, a kernel without
 * pidfd_open, the process gone). Checked against the leader's recorded start time after it is
 * opened: a pidfd opened on a PID reused meanwhile is another process's, and is closed.
 */
export function leaderPidfd(pid: number, startTime: number | undefined): number | undefined {
  const spawner = nativeSpawner();
  if (spawner instanceof Error || !spawner.pidfdOpen || startTime === undefined) return undefined;
  let fd: number;
  try {
    fd = spawner.pidfdOpen(pid);
  } catch {
    return undefined;
  }
  if (readStat(pid)?.startTime === startTime) return fd;
  closeQuietly(fd);
  return undefined;
}

/**
 * Leaders this daemon did not start (adopted after a crash, SPEC §19): the dead daemon was their
 * parent, and no other process can wait for them. Looked at in /proc every FOREIGN_EVERY_MS: gone,
 * a zombie, or its PID now another process's means it exited. A zombie still caught tells its
 * status (/proc's exit_code); once its new parent (init, systemd) reaped it, the pidfd the guardian
 * kept through the crash tells it (PIDFD_INFO_EXIT, Linux 6.15+); without one, the status is
 * unknown, and the session ends with neither code nor signal, saying why (docs/durability.md).
 */
const foreign = new Map<number, { startTime: number | undefined; onExit: ExitListener; pidfd: { addon: Addon; fd: number } | undefined; waited?: number }>();
let foreignTimer: NodeJS.Timeout | undefined;
const FOREIGN_EVERY_MS = 100;

function watchForeign(pid: number, startTime: number | undefined, onExit: ExitListener, pidfd: { addon: Addon; fd: number } | undefined): void {
  foreign.set(pid, { startTime, onExit, pidfd });
  foreignTimer ??= setInterval(lookForeign, FOREIGN_EVERY_MS);
  setImmediate(lookForeign);
}

/** Why a foreign leader's status is unknown when no pidfd was kept for it. */
const NO_PIDFD = 'the daemon that started it crashed, and its new parent reaped it before this daemon could see how it ended: no pidfd to it was kept';

function lookForeign(): void {
  for (const [pid, { startTime, onExit, pidfd }] of foreign) {
    const stat = readStat(pid);
    if (stat && stat.state !== 'Z' && (startTime === undefined || stat.startTime === startTime)) continue;
    const zombie = stat?.state === 'Z' ? zombieStatus(pid) : undefined;
    // Not a zombie any more: reaped by its new parent, and only the pidfd can tell how it ended.
    const told = zombie ?? (pidfd ? pidfdStatus(pidfd.addon, pidfd.fd) : { why: NO_PIDFD });
    // Between the zombie's end in /proc and the reap the kernel notes: looked at again next time (for a second at most).
    const entry = foreign.get(pid)!;
    if ('running' in told && told.running && (entry.waited = (entry.waited ?? 0) + 1) < 10) continue;
    foreign.delete(pid);
    if ('why' in told) onExit(null, null, undefined, told.why);
    else onExit(told.code, told.signal == null ? null : signalName(told.signal));
  }
  if (foreign.size === 0) {
    clearInterval(foreignTimer);
    foreignTimer = undefined;
  }
}

/** pidfdExit, its failures said as the reason the status is unknown. */
function pidfdStatus(addon: Addon, fd: number): { code: number | null; signal: number | null } | { why: string; running?: boolean } {
  if (!addon.pidfdExit) return { why: 'this build of the addon cannot read a process\'s exit through its pidfd (pidfdExit); rebuild it (node scripts/build-addon.mjs)' };
  try {
    const told = addon.pidfdExit(fd);
    return 'why' in told ? { why: `its new parent reaped it, and ${told.why}`, running: told.running } : told;
  } catch (err) {
    return { why: `its new parent reaped it, and its pidfd could not be read: ${(err as Error).message}` };
  }
}

