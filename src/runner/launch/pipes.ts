import { spawn } from 'node:child_process';
import type { EventEmitter } from 'node:events';
import { Socket } from 'node:net';
import type { Readable, Writable } from 'node:stream';
import { closeQuietly } from '../../base/close-quietly.js';
import { holdReading } from '../../base/hold-reading.js';
import { adoptChild, nativeSpawner, posixSpawn, type Addon, type ExitListener, type NativeChild } from '../native.js';
import { fdTarget } from '../procfs.js';
import type { JobInput } from '../../session/input.js';
import type { Stream } from '../../session/output.js';
import { withInherited } from './inherit.js';
import { SplicedPipe, SpliceRoute, splicer } from './splice.js';
import { nothing, withPidfd, type LaunchHooks, type Launched, type LaunchSpec } from './types.js';

/**
 * Run on pipes, in a new session and process group (setsid). `started`: the job was started by
 * startOnPipes before its session was made, and is wired to it here.
 */
export function launchPipes(spec: LaunchSpec, hooks: LaunchHooks, started?: StartedOnPipes): Launched {
  if (started) return wireSpawned(started, hooks);
  const addon = nativeSpawner();
  return addon instanceof Error ? launchForked(spec, hooks) : wireSpawned(spawnNow(addon, spec), hooks);
}

const notStarted: Launched = { pid: undefined, stdinId: undefined, input: undefined, detachOutput: nothing, release: nothing };

/**
 * A job started on pipes before its session was made (runner/start.ts): the exec's session is
 * made while the job starts running, not before (docs/benchmarks.md, the exec round trip). Its
 * exit is held until launchPipes wires it (the exit is told by a later turn of the loop, so it
 * never comes before), and `abandon` kills it if its session cannot be made.
 */
export type StartedOnPipes = { addon: Addon; child: NativeChild; exit: ExitRelay } | { addon: Addon; error: string };

/** Start the job now, through the addon; undefined where there is none (the fork path starts it once its session is made). */
export function startOnPipes(spec: LaunchSpec): StartedOnPipes | undefined {
  const addon = nativeSpawner();
  return addon instanceof Error ? undefined : spawnNow(addon, spec);
}

/** A job started early whose session could not be made: killed (its group), its descriptors closed; its exit is reaped as any. */
export function abandon(started: StartedOnPipes): void {
  if (!('child' in started)) return;
  const { child } = started;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // gone already
  }
  for (const fd of [child.stdin, child.stdout, child.stderr]) if (fd >= 0) closeQuietly(fd);
}

/** Through posix_spawn (native/spawn.c): no copy of the daemon's memory, whatever its size. */
function spawnNow(addon: Addon, spec: LaunchSpec): StartedOnPipes {
  const { file, args, steps } = spec.plan;
  const exit = new ExitRelay();
  try {
    return { addon, child: posixSpawn(addon, file, [file, ...args], spec.env.pairs(), spec.cwd, spec.stdin === 'null', exit.listener, steps), exit };
  } catch (err) {
    return { addon, error: startError(file, spec, err as NodeJS.ErrnoException) };
  }
}

/** An exit told before anyone listens is held for the listener to come. */
class ExitRelay {
  private to: ExitListener | undefined;
  private held: Parameters<ExitListener> | undefined;

  readonly listener: ExitListener = (...told) => {
    if (this.to) this.to(...told);
    else this.held = told;
  };

  /** A held exit is told once the code wiring the session is through (a microtask later), as a reaped exit would be. */
  listen(to: ExitListener): void {
    this.to = to;
    const told = this.held;
    this.held = undefined;
    if (told) queueMicrotask(() => to(...told));
  }
}

function wireSpawned(started: StartedOnPipes, hooks: LaunchHooks): Launched {
  if (!('child' in started)) {
    hooks.failed(started.error);
    return notStarted;
  }
  const { addon, child } = started;
  // The output is complete once the leader's status is known and both streams have closed.
  let pending = 3;
  const settle = () => {
    if (--pending === 0) hooks.closed();
  };
  started.exit.listen((code, signal, maxRssBytes) => {
    hooks.exit(code, signal, maxRssBytes);
    settle();
  });
  const { stdout, stderr } = outputPipes(addon, child.stdout, child.stderr, hooks);
  stdout.once('close', settle);
  stderr.once('close', settle);
  const stdin = child.stdin >= 0 ? new InputEnd(child.stdin, hooks) : undefined;
  // The spawner names the socket the job's fd 0 is: no look in /proc needed.
  const stdinId = child.stdinInode === undefined ? undefined : `socket:[${child.stdinInode}]`;
  return wirePipes(child.pid, { stdout, stderr, stdin }, hooks, stdinId, true);
}

/** The descriptors of a job on pipes that a restart hands to the next image (SPEC §19). */
export interface PipeEnds {
  pid: number;
  stdout: number;
  stderr: number;
  /** -1: its input is /dev/null, or was closed. */
  stdin: number;
  stdinId?: string;
  /** A pidfd to the leader, for a job adopted after a crash: how it ended, once its new parent reaped it (runner/native.ts). */
  pidfd?: number;
}

/**
 * A job on pipes that the last image started, wired again from its descriptors: the same
 * output, exit and input as a launch, and the same ends to hand over at the next restart.
 */
export function adoptPipes(addon: Addon, ends: PipeEnds, hooks: LaunchHooks): Launched {
  let pending = 3;
  const settle = () => {
    if (--pending === 0) hooks.closed();
  };
  const { stdout, stderr } = outputPipes(addon, ends.stdout, ends.stderr, hooks);
  stdout.once('close', settle);
  stderr.once('close', settle);
  const stdin = ends.stdin >= 0 ? new InputEnd(ends.stdin, hooks) : undefined;
  const launched = withPidfd(wirePipes(ends.pid, { stdout, stderr, stdin }, hooks, ends.stdinId, true), ends.pidfd);
  adoptChild(addon, ends.pid, (code, signal, maxRssBytes, unknown) => {
    launched.told();
    hooks.exit(code, signal, maxRssBytes, unknown);
    settle();
  }, ends.pidfd);
  return launched;
}

/**
 * Every job's output pipes are read into this one buffer: a read is handled whole (captured,
 * spooled, told) on the daemon's thread before the next read can be made, and what is kept of it
 * is copied by whoever keeps it (session/chunks.ts, session/spool.ts). A new buffer per read
 * would be 64 KiB outside V8's heap each time: with a few fast jobs their pressure brought full
 * collections, and the RSS of reads already dead (docs/benchmarks.md, issue 34 point 6).
 */
export const READ_BUFFER = Buffer.allocUnsafeSlow(64 * 1024);

/**
 * A job's two output pipes: spliced into its session's spool where it has one (runner/launch/splice.ts:
 * nothing read is lost with the daemon), else read as before.
 */
function outputPipes(addon: Addon, out: number, err: number, hooks: LaunchHooks): { stdout: Socket | SplicedPipe; stderr: Socket | SplicedPipe } {
  const splice = hooks.spool && splicer(addon);
  if (!splice || !hooks.spool) return { stdout: readPipe(out, 'stdout', hooks), stderr: readPipe(err, 'stderr', hooks) };
  const route = new SpliceRoute(splice, hooks.spool, READ_BUFFER, (stream) => hooks.unfinished(stream));
  const deliver = (stream: Stream, chunk: Buffer, spooled: boolean) => hooks.output(stream, chunk, spooled);
  return { stdout: route.pipe(out, 'stdout', deliver), stderr: route.pipe(err, 'stderr', deliver) };
}

/** A job's output pipe, read into READ_BUFFER: `hooks.output` gets each read, valid until it returns. */
function readPipe(fd: number, stream: Stream, hooks: LaunchHooks): Socket {
  return new Socket({
    fd,
    readable: true,
    writable: false,
    onread: {
      buffer: READ_BUFFER,
      callback: (n: number, buf: Buffer) => {
        if (n > 0) hooks.output(stream, buf.subarray(0, n));
      },
    },
  } as ConstructorParameters<typeof Socket>[0]);
}

/** A stream's descriptor (a Socket made on one), or -1 when it has none any more. */
function fdOf(stream: Socket | Readable | Writable | SplicedPipe | undefined): number {
  if (stream instanceof SplicedPipe) return stream.destroyed ? -1 : stream.fd;
  const fd = (stream as { _handle?: { fd?: number } } | undefined)?._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : -1;
}

/** Why a job did not start, naming the step of the spawner that failed (native/spawn.c). */
function startError(file: string, spec: LaunchSpec, err: NodeJS.ErrnoException): string {
  const user = spec.plan.steps?.user;
  if (err.syscall === 'chdir' && user) return `the workdir ${spec.cwd} is not accessible to uid ${user.uid} (sandbox.user): ${err.message}`;
  if (err.syscall === 'setrlimit') return `could not set the session's resource limits (limits.*): ${err.message}`;
  if (err.syscall && ['setgroups', 'setgid', 'setuid'].includes(err.syscall)) return `could not become uid ${user?.uid} (sandbox.user): ${err.message}`;
  const mounts = spec.plan.steps?.mounts;
  if (mounts && err.syscall && REVIEW_STEPS.has(err.syscall)) return reviewMountError(err, mounts);
  return `could not start ${file}: ${err.message}`;
}

/** The spawner's steps that set up a review session's overlays (native/spawn.c child_mounts). */
const REVIEW_STEPS = new Set(['unshare', 'setgroups', 'uid_map', 'gid_map', 'mount', 'overlay', 'setns']);

/**
 * Why a review session's overlay could not be set up, with what to do: the session is refused,
 * never run with direct writes (SPEC §16).
 */
export function reviewMountError(err: NodeJS.ErrnoException, mounts: NonNullable<NonNullable<LaunchSpec['plan']['steps']>['mounts']>): string {
  const where = mounts.overlays.map((o) => o.target).join(', ');
  const code = err.code ?? err.message;
  const fix =
    err.syscall === 'overlay'
      ? code === 'EINVAL'
        ? "the kernel refused the overlay's options: the workspace and the daemon's state directory must be on file systems overlayfs takes as its lower and upper (not overlayfs, FUSE or NFS for the upper); see procctl status, changes"
        : code === 'EPERM' || code === 'EACCES'
          ? 'the kernel does not let this daemon mount an overlay (overlayfs in user namespaces needs Linux 5.11; as root, CAP_SYS_ADMIN)'
          : 'see procctl status, changes for whether review mode runs here'
      : err.syscall === 'setns'
        ? 'the daemon could not join the namespaces it had made ahead for this review (runner/premount.ts); run the command again: a review with none made ahead mounts its own'
        : 'the daemon could not make the mount namespace a review session runs in (unprivileged user namespaces may be turned off: sysctl kernel.unprivileged_userns_clone=1)';
  return `changes "review" could not hold this session's writes to ${where}: ${err.syscall} failed (${code}); ${fix}. The command was not run; run it with changes "direct" to write straight in`;
}

/** Through Node's child_process (a fork): where the addon is not built or is turned off. */
function launchForked(spec: LaunchSpec, hooks: LaunchHooks): Launched {
  let child;
  const { file, args } = spec.plan.wrapped();
  try {
    child = withInherited(spec.plan.inherit, () =>
      spawn(file, args, {
        cwd: spec.cwd,
        env: spec.env.object(),
        detached: true,
        stdio: [spec.stdin === 'pipe' ? 'pipe' : 'ignore', 'pipe', 'pipe'],
      }),
    );
  } catch (err) {
    hooks.failed(`could not start ${file}: ${(err as Error).message}`);
    return notStarted;
  }
  child.on('error', (err) => {
    if (child.pid === undefined) hooks.failed(`could not start ${file}: ${err.message}`);
  });
  child.on('exit', (code, signal) => hooks.exit(code, signal));
  child.on('close', () => hooks.closed());
  child.stdout!.on('data', (chunk: Buffer) => hooks.output('stdout', chunk));
  child.stderr!.on('data', (chunk: Buffer) => hooks.output('stderr', chunk));
  return wirePipes(child.pid, { stdout: child.stdout!, stderr: child.stderr!, stdin: child.stdin ? new InputEnd(child.stdin, hooks) : undefined }, hooks);
}

/** A job's output as its launch reads it: a socket, a child_process stream, or a spliced pipe. */
type OutputStream = Socket | Readable | SplicedPipe;

/**
 * A job's input end: on the native path its socket's descriptor, made a Node socket only once
 * something is written to it or it is ended. Most jobs are never written to, and a socket made
 * for each (a libuv handle, three system calls, and its close) was work on every exec's way.
 * A job that exits or closes its stdin turns our writes into EPIPE: that only closes stdin.
 */
class InputEnd implements JobInput {
  private socket: Writable | undefined;
  /** The descriptor not yet made a socket; -1 once it is one, or closed. */
  private fd: number;

  constructor(
    end: number | Writable,
    private readonly hooks: Pick<LaunchHooks, 'inputClosed'>,
  ) {
    if (typeof end === 'number') this.fd = end;
    else {
      this.fd = -1;
      this.wire(end);
    }
  }

  private wire(socket: Writable): Writable {
    socket.on('error', () => this.hooks.inputClosed());
    socket.on('close', () => this.hooks.inputClosed());
    return (this.socket = socket);
  }

  /** The socket, made now if it is not yet (undefined once released). */
  private open(): Writable | undefined {
    if (this.socket || this.fd < 0) return this.socket;
    const socket = new Socket({ fd: this.fd, readable: false, writable: true });
    this.fd = -1;
    return this.wire(socket);
  }

  write(data: string | Buffer): void {
    this.open()?.write(data);
  }

  end(): void {
    this.open()?.end();
  }

  get queued(): number {
    return this.socket?.writableLength ?? 0;
  }

  /** Its descriptor while it is open (a restart hands it on), else -1. */
  descriptor(): number {
    if (!this.socket) return this.fd;
    return !this.socket.destroyed && !this.socket.writableEnded ? fdOf(this.socket) : -1;
  }

  release(): void {
    if (this.fd >= 0) closeQuietly(this.fd);
    this.fd = -1;
    this.socket?.destroy();
    this.socket?.removeAllListeners();
    // A destroyed stream still answers a late 'error' from its handle: swallow it.
    this.socket?.on('error', nothing);
  }
}

/** Output's errors and ends, input: the same for either way of starting (the output's reads are wired by each). */
function wirePipes(pid: number | undefined, pipes: { stdout: OutputStream; stderr: OutputStream; stdin: InputEnd | undefined }, hooks: LaunchHooks, stdinId?: string, reaped = false): Launched {
  const { stdin } = pipes;
  // Either kind of output stream is an emitter with destroy (a spliced pipe is no Readable).
  const stdout = pipes.stdout as EventEmitter & { destroy(): unknown };
  const stderr = pipes.stderr as EventEmitter & { destroy(): unknown };
  // A reset on an output stream ends that stream; it must never take the daemon down.
  stdout.on('error', () => stdout.destroy());
  stderr.on('error', () => stderr.destroy());
  const id = pid !== undefined && stdin ? (stdinId ?? pipeIdentity(pid)) : undefined;
  return {
    pid,
    stdinId: id,
    input: stdin,
    holdOutput: () => {
      const hold = (s: OutputStream) => (s instanceof SplicedPipe ? s.hold() : holdReading(s));
      const resumes = [hold(pipes.stdout), hold(pipes.stderr)];
      return () => {
        for (const resume of resumes) resume();
      };
    },
    // Only a job our own reaper waits for can be handed over: libuv reaps the children it forked.
    ends: () => {
      if (!reaped) return undefined;
      const out = fdOf(pipes.stdout);
      const err = fdOf(pipes.stderr);
      if (pid === undefined || out < 0 || err < 0) return undefined;
      return { pid, stdout: out, stderr: err, stdin: stdin?.descriptor() ?? -1, stdinId: id, stdinQueued: stdin?.queued ?? 0 };
    },
    detachOutput: () => {
      stdout.destroy();
      stderr.destroy();
    },
    release: () => {
      stdin?.release();
      for (const stream of [stdout, stderr]) {
        stream.destroy();
        stream.removeAllListeners();
        // A destroyed stream still answers a late 'error' from its handle: swallow it.
        stream.on('error', nothing);
      }
    },
  };
}

/**
 * What the job's fd 0 is, for the fork fallback: Node gives it one end of a socketpair. A job quick enough to have
 * redirected its own fd 0 already (`read x < fifo`) shows something else: then the input is
 * not known, and waiting-for-input detection stays off for the session rather than guess.
 */
function pipeIdentity(pid: number): string | undefined {
  const target = fdTarget(pid, 0);
  return target?.startsWith('socket:[') ? target : undefined;
}
