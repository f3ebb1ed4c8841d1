import { constants, openSync, readSync } from 'node:fs';
import { Socket } from 'node:net';
import { constants as os } from 'node:os';
import { ReadStream } from 'node:tty';
import { errnoName } from '../../base/addon.js';
import { closeQuietly } from '../../base/close-quietly.js';
import { holdReading } from '../../base/hold-reading.js';
import type { Spool } from '../../session/spool.js';
import type { Addon, SplicedHandle } from '../native.js';
import { READ_BUFFER } from './pipes.js';
import { SplicedPipe, SpliceRoute, splicer } from './splice.js';
import type { TapEnds } from './types.js';

export type Tapper = Required<Pick<Addon, 'tapTerminal' | 'tapPipe' | 'dupDescriptor'>> & Addon;

/** The addon's tap, where the build has it. */
export function tapper(addon: Addon): Tapper | undefined {
  return addon.tapTerminal && addon.tapPipe && addon.dupDescriptor ? (addon as Tapper) : undefined;
}

/** Where the daemon's log hears why a terminal is read the old way (its master read, not tapped): the session, what, and its fields. */
export type TapListener = (level: 'warn' | 'error', sessionId: string, message: string, fields: Record<string, unknown>) => void;

let listener: TapListener = () => undefined;

/** Where the daemon hears of a terminal read without its tap (daemon.ts: its log). */
export function setTapListener(fn: TapListener): void {
  listener = fn;
}

/** Say in the daemon's log why a session's terminal is read the old way. */
export function tapTrouble(level: 'warn' | 'error', sessionId: string, message: string, fields: Record<string, unknown> = {}): void {
  listener(level, sessionId, message, fields);
}

/** Whether this kernel splices from a terminal's master: asked once per daemon, at its first terminal. */
let mastersSplice: boolean | undefined;

function kernelTaps(addon: Tapper, sessionId: string): boolean {
  if (mastersSplice === undefined) {
    // A build without the probe: assumed, and a tap whose splice fails reads its master from then on.
    let why: string | undefined;
    try {
      const err = probeFault() ?? (addon.tapProbe ? addon.tapProbe() : 0);
      if (err !== 0) why = errnoName(err);
    } catch (err) {
      why = (err as Error).message;
    }
    mastersSplice = why === undefined;
    if (why !== undefined) tapTrouble('warn', sessionId, `this kernel does not splice from a terminal's master (${why}): terminals are read by node-pty, without a tap (a crash can lose one read of at most 64 KiB per terminal); Linux 6.5 and later splice from a tty`, { errno: why });
  }
  return mastersSplice;
}

/**
 * Where a terminal launched or adopted here is tapped: the session has a spool, its output is
 * spliced there (not PROCCTL_SPLICE=off), the build has the tap and the kernel splices from a
 * terminal's master.
 */
export function tapsInto(addon: Addon, spool: Spool | undefined, sessionId: string): Tapper | undefined {
  const tap = spool && splicer(addon) ? tapper(addon) : undefined;
  return tap && kernelTaps(tap, sessionId) ? tap : undefined;
}

/** What a test asks the probe to answer (`PROCCTL_FAULT_TAP=probe:<errno name>`: as a kernel without a tty's splice would). */
function probeFault(): number | undefined {
  const value = process.env.PROCCTL_FAULT_TAP;
  if (!value?.startsWith('probe:')) return undefined;
  const errno = (os.errno as Record<string, number>)[value.slice('probe:'.length)];
  if (errno === undefined) throw new Error(`PROCCTL_FAULT_TAP=${value}: expected an errno's name after probe: (probe:EINVAL)`);
  return errno;
}

/**
 * A failure a test injects into every tap's splice (`PROCCTL_FAULT_TAP=<errno name>[@<bytes>]`:
 * once so many bytes were moved, the next splice fails with it), as [errno, bytes]; undefined when
 * unset or when it is the probe's.
 */
export function tapFault(): [number, number] | undefined {
  const value = process.env.PROCCTL_FAULT_TAP;
  if (!value || value.startsWith('probe:')) return undefined;
  const m = /^(E[A-Z0-9]+)(?:@(\d+))?$/.exec(value);
  const errno = m ? (os.errno as Record<string, number>)[m[1]!] : undefined;
  if (!m || errno === undefined) throw new Error(`PROCCTL_FAULT_TAP=${value}: expected an errno's name, then @ and the bytes the tap moves before it fails (EINVAL, EPIPE@65536), or probe: and an errno's name`);
  return [errno, Number(m[2] ?? 0)];
}

/** Where the tap delivers: each batch (`spooled`: it is in the spool already), and the end of the output. */
export interface TapHooks {
  /** The session, named in the daemon's log when its tap fails. */
  sessionId: string;
  output(chunk: Buffer, spooled: boolean): void;
  /** The session's capture holds the first bytes of a character (SessionOutput.unfinished): the route reads meanwhile. */
  unfinished(): boolean;
  closed(): void;
}

/**
 * A terminal's output taken by the kernel (native/tap.c): master → the tap pipe by splice(2), and
 * the pipe → the session's spool through the same SpliceRoute as a job's output pipe (the spool's
 * offsets, its budget, its rotation, reading where splice is refused). So no byte read from the
 * master is ever only in the daemon's memory: it is in the pipe, whose read end the guardian
 * keeps, or in the spool (docs/durability.md, "Terminals"). The tap reads the master through a
 * descriptor of its own (a dup): the one the caller gives stays the caller's, for input, resizing
 * and the hand-over. Without a spool to splice into (PROCCTL_SPLICE=off, no spool, a pipe handed
 * on by an image that spliced) the pipe is read as a job's pipe is, and the capture spools it.
 *
 * The end: once every holder of the job's side has closed it and its output is all in the pipe,
 * the master reads EIO; the tap stops and closes the pipe's write end, the pipe is read to its end
 * and `closed` is told. A splice that fails otherwise (the tap says -errno), or a pipe that ends
 * under a running tap, is not the end: it is said in the daemon's log once, the pipe is read to its
 * end, and then the master is read directly (as a terminal carried without a tap), so no byte is
 * lost and the job never blocks on a terminal no one reads.
 *
 * Built in steps; when one throws, what the tap opened itself is closed and nothing the caller
 * handed (the master, a carried pipe's ends) is: the caller still owns those. Once built, the tap
 * owns the pipe's ends (it closes them at its end; `ends` hands them on).
 */
export class TerminalTap {
  private readonly handle: SplicedHandle;
  private readonly pipe: SplicedPipe | Socket;
  private readonly read: number;
  /** The tap's own descriptor of the master, until it is done with it (or its reader took it). */
  private master: number | undefined;
  private write: number | undefined;
  /** The master read directly, once the tap failed and the pipe was read to its end. */
  private reader: ReadStream | undefined;
  /** The tap stopped: at the output's end (EIO), or failed (then the master is read once the pipe is empty). */
  private stopped: 'end' | 'failed' | undefined;
  private told = false;
  private destroyed = false;

  constructor(addon: Tapper, spool: Spool | undefined, master: number, ends: TapEnds | undefined, private readonly hooks: TapHooks) {
    const opened: number[] = [];
    const own = (fd: number) => (opened.push(fd), fd);
    let handle: SplicedHandle | undefined;
    try {
      const fault = tapFault();
      const [read, write] = ends ? [ends.read, ends.write ?? own(reopenForWriting(ends.read))] : addon.tapPipe().map(own);
      this.read = read!;
      this.write = write!;
      this.master = own(addon.dupDescriptor(master));
      handle = addon.tapTerminal(this.master, this.write, (status) => this.tapStopped(status), fault?.[0] ?? 0, fault?.[1] ?? 0);
      this.handle = handle;
      // Last, as its reader takes the read end (a socket closes what it wraps): nothing after it can fail.
      // What the pipe holds (a restart's or a crash's leftovers) is read before anything the tap moves after it.
      const splice = spool && splicer(addon);
      if (splice && spool) this.pipe = new SpliceRoute(splice, spool, READ_BUFFER, () => hooks.unfinished()).pipe(this.read, 'stdout', (_stream, chunk, spooled) => hooks.output(chunk, spooled));
      else {
        const socket = new Socket({ fd: this.read, readable: true, writable: false, onread: { buffer: READ_BUFFER, callback: (n: number, buf: Buffer) => void (n > 0 && hooks.output(buf.subarray(0, n), false)) } } as ConstructorParameters<typeof Socket>[0]);
        // By the time a socket says its read failed, Node has closed the descriptor it wrapped: the
        // pipe cannot be read out (a readSync could read whatever took that number since), so it is said lost.
        socket.on('error', (err) => {
          if (!this.destroyed && !this.stopped) this.fail(`its pipe's read failed (${err.message}); what the pipe still held is lost`, { errno: (err as NodeJS.ErrnoException).code ?? null });
          socket.destroy();
        });
        this.pipe = socket;
      }
    } catch (err) {
      // Nothing was delivered: the caller reads the master another way (a carried pipe first), or fails.
      handle?.close();
      for (const fd of opened) closeQuietly(fd);
      throw err;
    }
    if (this.pipe instanceof SplicedPipe) this.pipe.once('closing', () => this.pipeGivenUp());
    this.pipe.once('close', () => this.pipeClosed());
  }

  /** The addon's tap stopped: 0 at the master's end (EIO), -errno when a splice failed otherwise. */
  private tapStopped(status: number): void {
    if (this.destroyed || this.stopped) return;
    if (status >= 0) {
      this.stopped = 'end';
      this.letGo();
      return;
    }
    this.fail(`splice from its master failed with ${errnoName(-status)}`, { errno: errnoName(-status) });
  }

  /** The tap cannot go on, the output has not ended: said once; the pipe is read to its end (its write end closed), then the master. */
  private fail(why: string, fields: Record<string, unknown>): void {
    this.stopped = 'failed';
    this.handle.close();
    tapTrouble('error', this.hooks.sessionId, `a terminal's tap failed (${why}): its output is read from the master from now on, as a terminal carried without a tap (a crash can lose what was read and not yet written)`, { ...fields, master: this.master });
    if (this.write !== undefined) closeQuietly(this.write);
    this.write = undefined;
  }

  /**
   * The route gives the pipe up under a running tap (its read failed), its read end still open:
   * the tap is stopped and its write end closed, then what the pipe still holds is read out and
   * delivered before the master is read. A read that fails is said with the bytes read until then.
   */
  private pipeGivenUp(): void {
    if (this.destroyed || this.stopped) return;
    this.fail('its pipe was given up under it; what the pipe still holds is read out first', {});
    const { bytes, error } = readPipeOut(this.read, (chunk) => this.hooks.output(chunk, false));
    if (error) tapTrouble('error', this.hooks.sessionId, `a terminal's tap pipe could not be read out after it was given up (${error.message}): ${bytes} bytes were read from it, what it still held is lost`, { errno: error.code ?? null, bytes });
  }

  /** The pipe was read to its end: the output's end, or after a failed tap the master's turn. */
  private pipeClosed(): void {
    if (this.destroyed || this.stopped === 'end') return this.tellClosed();
    // It ended under a running tap without being given up (pipeGivenUp): the tap is stopped, the master read.
    if (!this.stopped) this.fail('its pipe was closed under it', {});
    this.readMaster();
  }

  /** The master read directly (runner/launch/pty.ts adoptPty reads a carried terminal the same way). */
  private readMaster(): void {
    const fd = this.master;
    this.master = undefined;
    let reader: ReadStream;
    try {
      if (fd === undefined) throw new Error('the tap has no descriptor of the master left');
      reader = new ReadStream(fd);
    } catch (err) {
      if (fd !== undefined) closeQuietly(fd);
      tapTrouble('error', this.hooks.sessionId, `a terminal's master cannot be read after its tap failed (${(err as Error).message}): its output ends here`, {});
      this.tellClosed();
      return;
    }
    this.reader = reader;
    reader.on('data', (chunk: Buffer) => this.hooks.output(chunk, false));
    readToMasterEnd(reader, fd, (chunk) => this.hooks.output(chunk, false), this.hooks.sessionId);
    // EIO: every holder of the job's side closed it, which is the end of the output.
    reader.on('error', () => reader.destroy());
    reader.once('close', () => this.tellClosed());
  }

  private tellClosed(): void {
    if (this.told) return;
    this.told = true;
    this.hooks.closed();
  }

  /** The tap is done with the master (at its end, or destroyed): its copy and the pipe's write end are closed. */
  private letGo(): void {
    if (this.master !== undefined) closeQuietly(this.master);
    this.master = undefined;
    if (this.write !== undefined) closeQuietly(this.write);
    this.write = undefined;
  }

  /** Stop taking output (it waits in the terminal and the pipe) until the returned resume: a restart's quiet moment. */
  hold(): () => void {
    this.handle.pause();
    const pipe = this.pipe.destroyed ? undefined : this.pipe instanceof SplicedPipe ? this.pipe.hold() : holdReading(this.pipe);
    const reader = this.reader && !this.reader.destroyed ? holdReading(this.reader) : undefined;
    return () => {
      if (this.destroyed) return;
      pipe?.();
      reader?.();
      this.handle.resume();
    };
  }

  /**
   * What the next image carries: the pipe's ends while the output goes through it (the write end
   * is gone after a failure: the next image opens it again, as after a crash), none once the
   * master is read directly; undefined once the output has ended.
   */
  ends(): { tap?: TapEnds } | undefined {
    if (this.destroyed) return undefined;
    if (this.reader) return this.reader.destroyed ? undefined : {};
    if (this.pipe.destroyed) return undefined;
    return { tap: { read: this.read, ...(this.write !== undefined ? { write: this.write } : {}) } };
  }

  /** Stop, close every descriptor of the tap (the pipe's or the reader's 'close' follows). */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.handle.close();
    this.letGo();
    this.pipe.destroy();
    this.reader?.destroy();
  }
}

/** A second write end of the pipe behind `read` (a pipe opened again through /proc, as a FIFO is). */
function reopenForWriting(read: number): number {
  return openSync(`/proc/self/fd/${read}`, constants.O_WRONLY | constants.O_NONBLOCK);
}

/**
 * Read a pipe to its end with plain reads: to a 0 read, or once it is empty (EAGAIN: another write
 * end may still be open somewhere). Any other failure is answered with the bytes read until then.
 */
export function readPipeOut(fd: number, each: (chunk: Buffer) => void): { bytes: number; error?: NodeJS.ErrnoException } {
  return readOut(fd, each, 'EAGAIN');
}

/** Plain reads until a 0 read or the failure `end` names (the normal end); any other failure with the bytes read until then. */
function readOut(fd: number, each: (chunk: Buffer) => void, end: string): { bytes: number; error?: NodeJS.ErrnoException } {
  let bytes = 0;
  for (;;) {
    const buf = Buffer.allocUnsafe(64 * 1024);
    let n: number;
    try {
      n = readSync(fd, buf);
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === end ? { bytes } : { bytes, error: err as NodeJS.ErrnoException };
    }
    if (n === 0) return { bytes };
    bytes += n;
    // Outside the try: a failure of what takes the bytes is not a failure to read them.
    each(buf.subarray(0, n));
  }
}

/**
 * A terminal's master read by a stream, to its true end. libuv takes a hang-up of the master
 * (POLLHUP: every holder of the job's side closed it) after a short read for the end of the
 * output, while the kernel may still hold what the job wrote last for the master (handed to the
 * reading side a moment after it was written): the stream ends with that output unread. So at
 * the stream's 'end' (its descriptor still open) the master is read on with plain reads to EIO,
 * its real end. A master that reads EAGAIN there is still held open by someone: what it says
 * later cannot be read any more, and the log says so.
 */
export function readToMasterEnd(stream: { once(event: 'end', fn: () => void): unknown; destroyed: boolean }, fd: number, each: (chunk: Buffer) => void, sessionId: string): void {
  stream.once('end', () => {
    // Destroyed first (its release): its descriptor is closed, its number maybe another file's.
    if (stream.destroyed) return;
    // EAGAIN: someone holds the job's side still; EIO: the end.
    const { bytes, error } = readOut(fd, each, 'EIO');
    if (error) tapTrouble('error', sessionId, `a terminal's master could not be read to its end after its hang-up (${error.message}): ${bytes} bytes were read after it, what it still held is lost`, { errno: error.code ?? null, bytes });
  });
}

