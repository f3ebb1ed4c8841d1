import { closeSync, constants, openSync } from 'node:fs';
import { createRequire } from 'node:module';
import { isatty, ReadStream } from 'node:tty';
import type { JobInput } from '../../session/input.js';
import { holdReading } from '../../base/hold-reading.js';
import { closeQuietly } from '../../base/close-quietly.js';
import type { Spool } from '../../session/spool.js';
import { adoptChild, nativeSpawner, signalName, type Addon } from '../native.js';
import { withInherited } from './inherit.js';
import { ptyPrivates } from './node-pty-privates.js';
import { readPipeOut, readToMasterEnd, TerminalTap, tapper, tapsInto, tapTrouble, type Tapper } from './tap.js';
import { nothing, withPidfd, type LaunchHooks, type Launched, type LaunchSpec, type TapEnds, type TerminalEnds } from './types.js';

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
  const term = withInherited(spec.plan.inherit, () =>
    pty.spawn(file, args, {
      name: 'xterm-256color',
      cols: PTY_COLS,
      rows: PTY_ROWS,
      cwd: spec.cwd,
      env: spec.env.object() as Record<string, string>,
      // Raw bytes: the session decodes them (UTF-8 across chunks) and spools them without re-encoding.
      encoding: null,
    }),
  );
  const ptsName = (term as unknown as { ptsName?: string }).ptsName;
  const socket = (term as unknown as { _socket?: ReadStream })._socket;
  const master = (term as unknown as { _fd?: number })._fd;
  const addon = nativeSpawner();
  const tap = addon instanceof Error ? undefined : tapsInto(addon, hooks.spool, hooks.sessionId);
  if (tap) {
    // node-pty's reader must not race the tap for the master's bytes, and its public pause() does
    // not keep it from reading: the 'data' listener node-pty adds at its spawn schedules a first
    // read, which takes one chunk even while paused. So the daemon takes a descriptor of the master
    // of its own, and destroys node-pty's stream on it in the tick of the spawn, before that read
    // (it closes node-pty's descriptor). node-pty still reaps the leader on its thread and says so
    // through onExit (at once: its stream is closed); its write and resize, which use the closed
    // descriptor, are never called.
    let launched: (Launched & { exited(): void }) | undefined;
    let own: number | undefined;
    const privates = ptyPrivates(term);
    try {
      if (typeof privates === 'string') throw new Error(privates);
      own = tap.dupDescriptor(privates.master);
      launched = tappedTerminal(tap, { pid: term.pid, terminal: own, pts: privates.pts }, hooks.spool, hooks);
    } catch (err) {
      // No tap to be had (out of descriptors, for the copy of the master or the tap's pipe; node-pty's internals changed): node-pty reads it, as without splicing.
      if (own !== undefined) closeQuietly(own);
      tapTrouble('warn', hooks.sessionId, `a terminal's output cannot go through a tap (${(err as Error).message}): node-pty reads its master (a crash can lose one read of at most 64 KiB)`, { master });
    }
    if (launched && typeof privates !== 'string') {
      const wired = launched;
      privates.socket.destroy();
      term.onExit(({ exitCode, signal }) => {
        hooks.exit(signal ? null : exitCode, signal ? signalName(signal) : null);
        wired.exited();
      });
      return { ...wired, reapedByThread: true };
    }
  }
  term.onData((data: string | Buffer) => hooks.output('stdout', data));
  if (socket && typeof master === 'number') readToMasterEnd(socket, master, (chunk) => hooks.output('stdout', chunk), hooks.sessionId);
  const release = holdTerminal(term);
  term.onExit(({ exitCode, signal }) => {
    release();
    hooks.exit(signal ? null : exitCode, signal ? signalName(signal) : null);
    // node-pty reports the exit once the terminal's output has been read.
    hooks.closed();
  });
  return {
    pid: term.pid,
    stdinId: ptsName,
    input: {
      write: (data) => term.write(typeof data === 'string' ? data : data.toString('utf8')),
      end: () => term.write('\x04'),
      queued: 0,
    },
    detachOutput: nothing,
    // node-pty closes the terminal itself once the leader is gone and its output read.
    release: nothing,
    resize: (cols, rows) => term.resize(cols, rows),
    reapedByThread: true,
    ...(socket ? { holdOutput: () => holdReading(socket) } : {}),
    // node-pty's reaping thread is parked by the restart's last step (runner/handover.ts parkTerminals).
    ends: () => (ptsName && socket && typeof master === 'number' && !socket.destroyed ? { pid: term.pid, terminal: master, pts: ptsName, stdinQueued: socket.writableLength } : undefined),
  };
}

/**
 * A job on a terminal that the last image started (a planned restart, SPEC §19), wired again from
 * the terminal's master without node-pty: read and written here, resized through the addon, its
 * leader reaped by the daemon's own reaper. As for a launch, the job's side of the terminal is
 * held open until its output has been read (the end is decided by the session's drain). Its output
 * goes through a tap where it came with one or is spliced here (tappedTerminal); else the master is read.
 */
export function adoptPty(addon: Addon, ends: TerminalEnds, hooks: LaunchHooks): Launched {
  // A tap handed on is read first, whatever this image splices; a terminal read directly before (an older image) is tapped from now on where output is spliced.
  const tap = ends.tap ? tapper(addon) : tapsInto(addon, hooks.spool, hooks.sessionId);
  if (ends.tap && !tap) tapTrouble('warn', hooks.sessionId, "a terminal was carried over with its tap pipe, but this build of the addon has no tapTerminal: the pipe is read to its end, then the master directly (rebuild the addon: node scripts/build-addon.mjs)", { master: ends.terminal });
  let pipeTaken = false;
  if (tap) {
    let wired: (Launched & { exited(): void }) | undefined;
    try {
      wired = tappedTerminal(tap, ends, hooks.spool, hooks);
    } catch (err) {
      // What was handed is still ours (the tap closes only what it opened): read as an older image's terminal is, its pipe first.
      pipeTaken = err instanceof TapTaken;
      const pipe = !ends.tap ? '' : pipeTaken ? 'what its tap pipe held is lost (the tap had taken the pipe), ' : 'its tap pipe is read to its end, then ';
      tapTrouble('warn', hooks.sessionId, `a terminal carried over cannot be tapped (${(err as Error).message}): ${pipe}its master is read directly (a crash can lose one read of at most 64 KiB)`, { master: ends.terminal });
    }
    // Outside the try: the tap is running from here, and its failure path is not these steps'.
    if (wired) {
      const tapped = wired;
      const launched = withPidfd(tapped, ends.pidfd);
      adoptChild(addon, ends.pid, (code, signal, maxRssBytes, unknown) => {
        launched.told();
        hooks.exit(code, signal, maxRssBytes, unknown);
        tapped.exited();
      }, ends.pidfd);
      return launched;
    }
  }
  // What the last image's tap moved and no one spooled: before anything read from the master.
  const leftovers = ends.tap && !pipeTaken ? drainTap(ends.tap, hooks.sessionId) : [];
  const socket = new ReadStream(ends.terminal);
  // A stream reads only once it has a 'data' listener: added after the leftovers are delivered (once the session is wired).
  process.nextTick(() => {
    if (socket.destroyed) return;
    for (const chunk of leftovers) hooks.output('stdout', chunk);
    socket.on('data', (chunk: Buffer) => hooks.output('stdout', chunk));
  });
  readToMasterEnd(socket, ends.terminal, (chunk) => hooks.output('stdout', chunk), hooks.sessionId);
  // EIO: every holder of the job's side closed it, which is the end of the output.
  socket.on('error', () => socket.destroy());
  socket.once('close', () => hooks.closed());
  let slave: number | undefined;
  try {
    slave = openSync(ends.pts, constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    // the job's side is gone already: the master reads what is left, then EIO
  }
  const resize = addon.setWindowSize;
  const launched = withPidfd({
    pid: ends.pid,
    stdinId: ends.pts,
    input: masterInput(socket),
    detachOutput: () => socket.destroy(),
    release: () => {
      socket.destroy();
      socket.removeAllListeners();
      socket.on('error', nothing);
      if (slave !== undefined) closeSync(slave);
      slave = undefined;
    },
    resize: resize ? (cols, rows) => resize(ends.terminal, cols, rows) : undefined,
    holdOutput: () => holdReading(socket),
    ends: () => (socket.destroyed ? undefined : { pid: ends.pid, terminal: ends.terminal, pts: ends.pts, stdinQueued: socket.writableLength }),
  }, ends.pidfd);
  adoptChild(addon, ends.pid, (code, signal, maxRssBytes, unknown) => {
    launched.told();
    hooks.exit(code, signal, maxRssBytes, unknown);
  }, ends.pidfd);
  return launched;
}

/**
 * What a tap pipe carried over holds (moved from the master by the last image's tap, not yet
 * spooled), read to its end with plain reads: its write end is closed first (no tap moves into it
 * any more), so the read stops at its end or, where someone else still holds a write end, once it
 * is empty (EAGAIN). Any other error is said in the daemon's log with the bytes read until then.
 * Both ends are closed.
 */
function drainTap(tap: TapEnds, sessionId: string): Buffer[] {
  if (tap.write !== undefined) closeQuietly(tap.write);
  const chunks: Buffer[] = [];
  const { bytes, error } = readPipeOut(tap.read, (chunk) => chunks.push(chunk));
  if (error) tapTrouble('error', sessionId, `a terminal's carried tap pipe could not be read to its end (${error.message}): ${bytes} bytes were read from it, what it still held is lost; its master is read from now on`, { errno: error.code ?? null, bytes, pipe: tap.read });
  closeQuietly(tap.read);
  return chunks;
}

/** A tappedTerminal step failed after its tap was built: the tap was destroyed, and with it a carried pipe's ends (not the caller's to read or close any more). */
class TapTaken extends Error {}

/**
 * A terminal whose output goes through a tap (runner/launch/tap.ts: master → a pipe → the spool,
 * by splice): the master is written (input, C-d) and resized here, and handed on with the tap's
 * pipe. The job's side is held open until its leader exits (`exited`): then the master reads EIO
 * once every other holder closed it and all its output has been moved, which is the end of the
 * output; a process that escaped the group and holds it still is left to the session's drain.
 */
function tappedTerminal(addon: Tapper, ends: TerminalEnds, spool: Spool | undefined, hooks: LaunchHooks): Launched & { exited(): void } {
  // What can throw comes before the tap: once built, it owns a carried pipe's ends and reads the
  // master, so a caller that falls back after a throw would close those ends twice and read the
  // master beside it.
  const resize = addon.setWindowSize;
  if (!isatty(ends.terminal)) throw new Error(`descriptor ${ends.terminal} is not a terminal (its master expected)`);
  let slave: number | undefined;
  try {
    slave = openSync(ends.pts, constants.O_RDWR | constants.O_NOCTTY);
  } catch {
    // the job's side is gone already: the tap moves what is left, then EIO
  }
  const letGo = () => {
    if (slave !== undefined) closeQuietly(slave);
    slave = undefined;
  };
  let tap: TerminalTap;
  // A tap destroyed because a later step failed says nothing of the output's end: the caller reads the master instead.
  let abandoned = false;
  try {
    tap = new TerminalTap(addon, spool, ends.terminal, ends.tap, { sessionId: hooks.sessionId, output: (chunk, spooled) => hooks.output('stdout', chunk, spooled), unfinished: () => hooks.unfinished('stdout'), closed: () => void (abandoned || hooks.closed()) });
  } catch (err) {
    letGo();
    throw err;
  }
  // Written, never read (a tty stream reads only once asked to): the tap reads the master.
  let writer: ReadStream;
  try {
    writer = new ReadStream(ends.terminal);
  } catch (err) {
    // Not expected once the master is known a terminal; should it happen, the tap does not outlive the launch.
    abandoned = true;
    tap.destroy();
    letGo();
    throw new TapTaken((err as Error).message);
  }
  writer.on('error', () => writer.destroy());
  return {
    pid: ends.pid,
    stdinId: ends.pts,
    input: masterInput(writer),
    detachOutput: () => tap.destroy(),
    release: () => {
      tap.destroy();
      writer.destroy();
      writer.removeAllListeners();
      writer.on('error', nothing);
      letGo();
    },
    // Never once the writer closed the master: its number may be another file's by then.
    resize: resize ? (cols, rows) => void (!writer.destroyed && resize(ends.terminal, cols, rows)) : undefined,
    holdOutput: () => tap.hold(),
    ends: () => {
      const t = tap.ends();
      return writer.destroyed || !t ? undefined : { pid: ends.pid, terminal: ends.terminal, pts: ends.pts, ...t, stdinQueued: writer.writableLength };
    },
    exited: letGo,
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

/**
 * Input to a terminal written to its master: the end is C-d, as a person types it; what the job
 * has not read waits in the terminal, not counted (as node-pty's own input).
 */
function masterInput(master: ReadStream): JobInput {
  return { write: (data) => void master.write(data), end: () => void master.write('\x04'), queued: 0 };
}
