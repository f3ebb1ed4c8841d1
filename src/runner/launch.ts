import { spawn } from 'node:child_process';
import { closeSync, constants, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { nativeSpawner, posixSpawn, signalName, type Addon } from './native.js';
import { fdTarget } from './procfs.js';
import type { JobInput } from '../session/input.js';
import type { Stream } from '../session/output.js';
import type { LaunchPlan } from '../sandbox/plan.js';

/** What a session writes its input to: a pipe or a terminal. */

export interface LaunchHooks {
  output(stream: Stream, chunk: Buffer | string): void;
  /** The leader exited (its status is known; output may still be in flight). */
  exit(code: number | null, signal: string | null): void;
  /** All output has been delivered (every writer of the output closed it). */
  closed(): void;
  /** The command could not be started at all. */
  failed(message: string): void;
  /** The job closed its stdin (or writing to it failed). */
  inputClosed(): void;
}

export interface Launched {
  pid: number | undefined;
  /** What the job's fd 0 is (`socket:[…]`, `/dev/pts/N`), read before the job can redirect it. */
  stdinId: string | undefined;
  input: JobInput | undefined;
  /** Stop waiting for the output: close our ends. */
  detachOutput(): void;
  /**
   * The session is over: close every end the daemon still holds (stdin above all, which no
   * one closes when the job never reads to its end) and let go of the session's hooks.
   */
  release(): void;
  /** For a terminal: its size changed. */
  resize?(cols: number, rows: number): void;
}

export interface LaunchSpec {
  /** What to run and how it is confined (src/sandbox/plan.ts): the shell, or bwrap around it. */
  plan: Pick<LaunchPlan, 'file' | 'args' | 'steps' | 'wrapped'>;
  cwd: string;
  env: NodeJS.ProcessEnv;
  stdin: 'pipe' | 'null';
}

/** Run on pipes, in a new session and process group (setsid). */
export function launchPipes(spec: LaunchSpec, hooks: LaunchHooks): Launched {
  const addon = nativeSpawner();
  return addon instanceof Error ? launchForked(spec, hooks) : launchSpawned(addon, spec, hooks);
}

const nothing = () => undefined;
const notStarted: Launched = { pid: undefined, stdinId: undefined, input: undefined, detachOutput: nothing, release: nothing };

/** Through posix_spawn (native/spawn.c): no copy of the daemon's memory, whatever its size. */
function launchSpawned(addon: Addon, spec: LaunchSpec, hooks: LaunchHooks): Launched {
  // The output is complete once the leader's status is known and both streams have closed.
  let pending = 3;
  const settle = () => {
    if (--pending === 0) hooks.closed();
  };
  let child;
  const { file, args, steps } = spec.plan;
  try {
    child = posixSpawn(addon, file, [file, ...args], spec.env, spec.cwd, spec.stdin === 'null', (code, signal) => {
      hooks.exit(code, signal);
      settle();
    }, steps);
  } catch (err) {
    hooks.failed(startError(file, spec, err as NodeJS.ErrnoException));
    return notStarted;
  }
  const stdout = new Socket({ fd: child.stdout, readable: true, writable: false });
  const stderr = new Socket({ fd: child.stderr, readable: true, writable: false });
  stdout.once('close', settle);
  stderr.once('close', settle);
  const stdin = child.stdin >= 0 ? new Socket({ fd: child.stdin, readable: false, writable: true }) : undefined;
  return wirePipes(child.pid, { stdout, stderr, stdin }, hooks);
}

/** Why a job did not start, naming the step of the spawner that failed (native/spawn.c). */
function startError(file: string, spec: LaunchSpec, err: NodeJS.ErrnoException): string {
  const user = spec.plan.steps?.user;
  if (err.syscall === 'chdir' && user) return `the workdir ${spec.cwd} is not accessible to uid ${user.uid} (sandbox.user): ${err.message}`;
  if (err.syscall === 'setrlimit') return `could not set the session's resource limits (limits.*): ${err.message}`;
  if (err.syscall && ['setgroups', 'setgid', 'setuid'].includes(err.syscall)) return `could not become uid ${user?.uid} (sandbox.user): ${err.message}`;
  return `could not start ${file}: ${err.message}`;
}

/** Through Node's child_process (a fork): where the addon is not built or is turned off. */
function launchForked(spec: LaunchSpec, hooks: LaunchHooks): Launched {
  let child;
  const { file, args } = spec.plan.wrapped();
  try {
    child = spawn(file, args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true,
      stdio: [spec.stdin === 'pipe' ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    hooks.failed(`could not start ${file}: ${(err as Error).message}`);
    return notStarted;
  }
  child.on('error', (err) => {
    if (child.pid === undefined) hooks.failed(`could not start ${file}: ${err.message}`);
  });
  child.on('exit', (code, signal) => hooks.exit(code, signal));
  child.on('close', () => hooks.closed());
  return wirePipes(child.pid, { stdout: child.stdout!, stderr: child.stderr!, stdin: child.stdin ?? undefined }, hooks);
}

/** Output to the session, input from it: the same for either way of starting. */
function wirePipes(pid: number | undefined, pipes: { stdout: Socket | Readable; stderr: Socket | Readable; stdin: Writable | undefined }, hooks: LaunchHooks): Launched {
  const { stdout, stderr, stdin } = pipes;
  stdout.on('data', (chunk: Buffer) => hooks.output('stdout', chunk));
  stderr.on('data', (chunk: Buffer) => hooks.output('stderr', chunk));
  // A reset on an output stream ends that stream; it must never take the daemon down.
  stdout.on('error', () => stdout.destroy());
  stderr.on('error', () => stderr.destroy());
  let input: JobInput | undefined;
  if (stdin) {
    // A job that exits or closes its stdin turns our writes into EPIPE: that only closes stdin.
    stdin.on('error', () => hooks.inputClosed());
    stdin.on('close', () => hooks.inputClosed());
    input = {
      write: (data) => void stdin.write(data),
      end: () => stdin.end(),
      get queued() {
        return stdin.writableLength;
      },
    };
  }
  return {
    pid,
    stdinId: pid !== undefined && stdin ? pipeIdentity(pid) : undefined,
    input,
    detachOutput: () => {
      stdout.destroy();
      stderr.destroy();
    },
    release: () => {
      for (const stream of [stdin, stdout, stderr]) {
        stream?.destroy();
        stream?.removeAllListeners();
        // A destroyed stream still answers a late 'error' from its handle: swallow it.
        stream?.on('error', nothing);
      }
    },
  };
}

/**
 * What the job's fd 0 is: Node gives it one end of a socketpair. A job quick enough to have
 * redirected its own fd 0 already (`read x < fifo`) shows something else: then the input is
 * not known, and waiting-for-input detection stays off for the session rather than guess.
 */
function pipeIdentity(pid: number): string | undefined {
  const target = fdTarget(pid, 0);
  return target?.startsWith('socket:[') ? target : undefined;
}

export const PTY_COLS = 120;
export const PTY_ROWS = 30;

type NodePty = typeof import('@lydell/node-pty');
let nodePty: NodePty | Error | undefined;

/** node-pty, loaded on first use; an Error when it is not built on this machine. */
function loadPty(): NodePty | Error {
  if (nodePty === undefined) {
    try {
      nodePty = createRequire(import.meta.url)('@lydell/node-pty') as NodePty;
    } catch (err) {
      nodePty = err as Error;
    }
  }
  return nodePty;
}

/**
 * Run under a pseudo-terminal (node-pty: the child is a session leader with the terminal as its
 * controlling tty, so pid = process group). Throws when a terminal cannot be had, so the caller
 * can fall back to pipes and say so.
 */
export function launchPty(spec: LaunchSpec, hooks: LaunchHooks): Launched {
  const pty = loadPty();
  if (pty instanceof Error) throw new Error(`node-pty is not available (${pty.message.split('\n')[0]})`);
  const { file, args } = spec.plan.wrapped();
  const term = pty.spawn(file, args, {
    name: 'xterm-256color',
    cols: PTY_COLS,
    rows: PTY_ROWS,
    cwd: spec.cwd,
    env: spec.env as Record<string, string>,
    // Raw bytes: the session decodes them (UTF-8 across chunks) and spools them without re-encoding.
    encoding: null,
  });
  term.onData((data: string | Buffer) => hooks.output('stdout', data));
  const release = holdTerminal(term);
  term.onExit(({ exitCode, signal }) => {
    release();
    hooks.exit(signal ? null : exitCode, signal ? signalName(signal) : null);
    // node-pty reports the exit once the terminal's output has been read.
    hooks.closed();
  });
  return {
    pid: term.pid,
    stdinId: (term as unknown as { ptsName?: string }).ptsName,
    input: {
      write: (data) => term.write(typeof data === 'string' ? data : data.toString('utf8')),
      end: () => term.write('\x04'),
      queued: 0,
    },
    detachOutput: nothing,
    // node-pty closes the terminal itself once the leader is gone and its output read.
    release: nothing,
    resize: (cols, rows) => term.resize(cols, rows),
  };
}

/** Silence on a terminal, after its leader exited, that says all its output has been read. */
const DRAIN_QUIET_MS = 50;

/** Terminal leaders being watched for their exit, all looked at by one timer. */
const leaders = new Map<number, () => void>();
let leaderTimer: NodeJS.Timeout | undefined;
const LEADER_POLL_MS = 10;

function watchLeader(pid: number, onGone: () => void): () => void {
  leaders.set(pid, onGone);
  leaderTimer ??= setInterval(() => {
    for (const [p, gone] of leaders) {
      try {
        process.kill(p, 0);
      } catch {
        leaders.delete(p);
        gone();
      }
    }
    if (leaders.size === 0) {
      clearInterval(leaderTimer);
      leaderTimer = undefined;
    }
  }, LEADER_POLL_MS);
  return () => {
    leaders.delete(pid);
  };
}

type PtySocket = { destroy: (err?: Error) => unknown; destroyed: boolean; on: (e: 'data', fn: () => void) => void };

/**
 * Make a terminal session's output complete. When the job exits, its side of the terminal is
 * hung up and node-pty may close its reader (and with it the terminal, hanging up processes
 * still on it) before everything the job printed has been read (microsoft/node-pty#72). So the
 * daemon holds the job's side of the terminal open itself, notices the leader's exit, and closes
 * the reader only once a turn of the event loop brings no more output. Returns the release.
 */
function holdTerminal(term: { pid: number }): () => void {
  const ptsName = (term as { ptsName?: string }).ptsName;
  const socket = (term as { _socket?: PtySocket })._socket;
  if (!ptsName || !socket || typeof socket.destroy !== 'function') return () => undefined;
  let slave: number | undefined;
  try {
    slave = openSync(ptsName, constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    return () => undefined;
  }
  const destroy = socket.destroy.bind(socket);
  let chunks = 0;
  socket.on('data', () => chunks++);
  let draining = false;
  socket.destroy = (err?: Error) => {
    if (draining) return socket;
    draining = true;
    const deadline = Date.now() + 2000;
    let seen = chunks;
    // The kernel hands a terminal's output to the reading side from a worker, a moment after the
    // writer wrote it: wait for a short silence, not only one turn of the loop.
    const check = () => {
      if (socket.destroyed) return;
      if (chunks !== seen && Date.now() < deadline) {
        seen = chunks;
        setTimeout(() => setImmediate(check), DRAIN_QUIET_MS);
        return;
      }
      destroy(err);
    };
    setTimeout(() => setImmediate(check), DRAIN_QUIET_MS);
    return socket;
  };
  // node-pty says nothing until the reader closes, which our held side now delays: watch the leader.
  const stopWatching = watchLeader(term.pid, () => socket.destroy());
  return () => {
    stopWatching();
    if (slave !== undefined) closeSync(slave);
    slave = undefined;
  };
}
