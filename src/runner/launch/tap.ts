import { constants, openSync } from 'node:fs';
import { Socket } from 'node:net';
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

/** Where a terminal launched or adopted here is tapped: the session has a spool, and its output is spliced there (not PROCCTL_SPLICE=off). */
export function tapsInto(addon: Addon, spool: Spool | undefined): Tapper | undefined {
  return spool && splicer(addon) ? tapper(addon) : undefined;
}

/** Where the tap delivers: each batch (`spooled`: it is in the spool already), and the end of the output. */
export interface TapHooks {
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
 * and `closed` is told.
 */
export class TerminalTap {
  private readonly handle: SplicedHandle;
  private readonly pipe: SplicedPipe | Socket;
  private readonly read: number;
  /** The tap's own descriptor of the master, until it is done with it. */
  private master: number | undefined;
  private write: number | undefined;
  private destroyed = false;

  constructor(addon: Tapper, spool: Spool | undefined, master: number, ends: TapEnds | undefined, hooks: TapHooks) {
    const [read, write] = ends ? [ends.read, ends.write ?? reopenForWriting(ends.read)] : addon.tapPipe();
    this.read = read;
    this.write = write;
    let own: number;
    try {
      own = addon.dupDescriptor(master);
      this.master = own;
    } catch (err) {
      if (!ends) closeQuietly(read);
      closeQuietly(write);
      throw err;
    }
    // What the pipe holds (a restart's or a crash's leftovers) is read before anything the tap moves after it.
    const splice = spool && splicer(addon);
    if (splice && spool) this.pipe = new SpliceRoute(splice, spool, READ_BUFFER, () => hooks.unfinished()).pipe(read, 'stdout', (_stream, chunk, spooled) => hooks.output(chunk, spooled));
    else {
      const socket = new Socket({ fd: read, readable: true, writable: false, onread: { buffer: READ_BUFFER, callback: (n: number, buf: Buffer) => void (n > 0 && hooks.output(buf.subarray(0, n), false)) } } as ConstructorParameters<typeof Socket>[0]);
      socket.on('error', () => socket.destroy());
      this.pipe = socket;
    }
    this.pipe.once('close', () => hooks.closed());
    try {
      this.handle = addon.tapTerminal(own, write, () => this.ended());
    } catch (err) {
      // Nothing was delivered: its end is not the output's (the caller reads the master another way, or fails).
      this.pipe.removeAllListeners('close');
      this.pipe.destroy();
      this.ended();
      throw err;
    }
  }

  /** The master is done with (EIO at its end, or a failed splice): the pipe is read to its end. */
  private ended(): void {
    if (this.master !== undefined) closeQuietly(this.master);
    this.master = undefined;
    if (this.write !== undefined) closeQuietly(this.write);
    this.write = undefined;
  }

  /** Stop taking output (it waits in the terminal and the pipe) until the returned resume: a restart's quiet moment. */
  hold(): () => void {
    this.handle.pause();
    const resume = this.pipe instanceof SplicedPipe ? this.pipe.hold() : holdReading(this.pipe);
    return () => {
      if (this.destroyed) return;
      resume();
      this.handle.resume();
    };
  }

  /** The pipe's ends for the next image; undefined once it was read to its end. */
  ends(): TapEnds | undefined {
    if (this.destroyed || this.pipe.destroyed) return undefined;
    return { read: this.read, ...(this.write !== undefined ? { write: this.write } : {}) };
  }

  /** Stop, close every descriptor of the tap (the pipe's 'close' follows). */
  destroy(): void {
    if (this.destroyed) return;
    this.destroyed = true;
    this.handle.close();
    this.ended();
    this.pipe.destroy();
  }
}

/** A second write end of the pipe behind `read` (a pipe opened again through /proc, as a FIFO is). */
function reopenForWriting(read: number): number {
  return openSync(`/proc/self/fd/${read}`, constants.O_WRONLY | constants.O_NONBLOCK);
}
