import { EventEmitter } from 'node:events';
import { constants as os } from 'node:os';
import { errnoName } from '../../base/addon.js';
import { closeQuietly } from '../../base/close-quietly.js';
import { spliceableLength, type Stream } from '../../session/output.js';
import type { Spool } from '../../session/spool.js';
import type { Addon, SplicedHandle, SpliceTarget } from '../native.js';

/** A batch's status (native/splice.c; 0: more may come). A new target asks first (a quiet job opens no file). */
const ROOM = 1;
const END = 2;
/** The target asks JavaScript where to go before the next splice (as a new one does). */
const ASK = -2;

/**
 * A splice's errors that say the spool's file system takes none (no splice_write, an old kernel):
 * the session reads its pipes from then on, as before. Others (a full disk, a read-only file
 * system) are write faults, counted as the spool counts its own.
 */
const REFUSED = new Set([os.errno.EINVAL, os.errno.ENOSYS, os.errno.EOPNOTSUPP]);

let onRefused: (file: string, reason: string) => void = () => undefined;

/** Where the daemon hears that a session's spool refused a splice (once per session). */
export function setSpliceListener(fn: (file: string, reason: string) => void): void {
  onRefused = fn;
}

type Splicer = Required<Pick<Addon, 'spliceTarget' | 'splicePipe'>>;

/**
 * The addon's splice, where it can be used: the build has it, and PROCCTL_SPLICE=off (a bench's
 * "before", a kernel that misbehaves) is not set in the daemon's environment.
 */
export function splicer(addon: Addon): Splicer | undefined {
  if (process.env.PROCCTL_SPLICE === 'off' || !addon.spliceTarget || !addon.splicePipe) return undefined;
  return addon as Splicer;
}

/**
 * One job's output pipes moved into its session's spool by the kernel (splice(2), native/splice.c):
 * what has left a pipe is in the spool file, so a daemon killed at any instant loses none of it
 * (docs/durability.md). Both pipes share one target, the end of the spool's current segment, so
 * the file holds the streams in the order the daemon took them. Each batch is read back into the
 * shared read buffer and goes on to the session (tails, events, prompt detection) as a read did.
 *
 * The spool decides where and how much: never past its segment's end (it rotates, then the
 * target follows), never past the disk budget. While it cannot take a splice (the budget is
 * spent, output waits to be written, a write failed a moment ago) the pipes are read into the
 * buffer and each read handed on as not spooled: the capture writes it (session/output.ts, whole
 * characters per stream, as for any job read); once the spool is drained the pipes are spliced
 * again. A file system that refuses splice turns the session to reading for good.
 *
 * A stream's unfinished character has one owner, the capture's decoder: a spliced batch that ends
 * inside one is counted without its first bytes (1-3, left past the spool's count, where the next
 * write goes; session/output.ts spliceableLength), and the pipes are read while any open stream's
 * capture holds such bytes, so the capture writes the character whole once its rest has come (or
 * U+FFFD at the stream's end).
 */
export class SpliceRoute {
  private readonly target: SpliceTarget;
  /**
   * Where the target points: the spool's file, reading into the buffer, or nowhere yet (it asks
   * when a pipe has bytes: a job that prints nothing opens no file, native/splice.c).
   */
  private mode: 'ask' | 'splice' | 'read' = 'ask';
  private refused = false;
  /** Waiting for the spool to drain, to splice again. */
  private waiting = false;
  /** The open pipes and their streams. */
  private readonly pipes = new Map<SplicedPipe, Stream>();

  constructor(
    private readonly addon: Splicer,
    private readonly spool: Spool,
    private readonly buffer: Buffer,
    /** The stream's capture holds the first bytes of a character whose rest has not come (session/output.ts `unfinished`). */
    private readonly unfinished: (stream: Stream) => boolean,
  ) {
    this.target = addon.spliceTarget();
    // The spool closed its segment (a rotation, a fault, its end): the next batch asks again where to go.
    spool.onFdClosed = () => {
      if (this.mode !== 'splice') return;
      this.mode = 'ask';
      this.target.set(ASK);
    };
  }

  /** Splice one of the job's pipes (it is the caller's to hand over; closed by `destroy`). */
  pipe(fd: number, stream: Stream, deliver: Deliver): SplicedPipe {
    const pipe = new SplicedPipe(fd, (p) => this.pipes.delete(p));
    this.pipes.set(pipe, stream);
    pipe.attach(this.addon.splicePipe(fd, this.target, this.buffer, (n, status) => this.batch(pipe, stream, n, status, deliver)));
    return pipe;
  }

  /**
   * Point the target at the spool's end, or at reading while the spool cannot take a splice or an
   * open stream's capture holds an unfinished character (the other stream must not be spliced
   * between its bytes; a restart hands such bytes on too).
   */
  private aim(): void {
    const at = this.refused || this.holding() ? undefined : this.spool.spliceAt();
    this.mode = at ? 'splice' : 'read';
    if (at) this.target.set(at.fd, at.offset, at.room);
    else this.target.set(-1);
  }

  /** Once the spool has written what it was given, splice again. */
  private afterDrain(): void {
    if (this.waiting || this.refused) return;
    this.waiting = true;
    void this.spool.drained().then(() => {
      this.waiting = false;
      // Only reading is turned back to splicing here: a target that asks does so itself once a pipe has bytes.
      if (this.mode === 'read' && this.pipes.size > 0 && !this.holding()) this.aim();
    });
  }

  /** Some open stream's capture holds the first bytes of a character (an ended one's are the session's end to write). */
  private holding(): boolean {
    for (const stream of this.pipes.values()) if (this.unfinished(stream)) return true;
    return false;
  }

  private batch(pipe: SplicedPipe, stream: Stream, n: number, status: number, deliver: Deliver): void {
    const spliced = this.mode === 'splice';
    let reaim = status === ROOM;
    if (n > 0) {
      const chunk = this.buffer.subarray(0, n);
      if (spliced) {
        // A character the batch ends inside is not counted: the capture holds its first bytes.
        const whole = spliceableLength(chunk);
        const rotated = this.spool.spliced(whole);
        reaim = rotated || reaim;
        if (whole < n) {
          this.mode = 'read';
          this.target.set(-1);
          reaim = false;
        }
        // The spool is aimed again before the session hears of the chunk: a rotation closed the file the target names.
        if (reaim && status >= 0) {
          this.aim();
          reaim = false;
        }
        // None counted (an invalid lead before the unfinished character): the capture writes the batch over its copy.
        deliver(stream, chunk, whole > 0);
        if (whole < n) this.afterDrain();
      } else {
        // Read: the capture writes it to the spool (whole characters), then the spool drains and splicing resumes.
        deliver(stream, chunk, false);
        this.afterDrain();
      }
    }
    if (status < 0 && spliced) {
      const code = -status;
      const name = errnoName(code);
      if (REFUSED.has(code)) {
        this.refused = true;
        onRefused(this.spool.file, `splice(2) into ${this.spool.file} failed with ${name}`);
      } else this.spool.spliceFailed(Object.assign(new Error(`splice into ${this.spool.file}: ${name}`), { code: name }));
      // The pipe is read from now on (native/splice.c goes on once the target changed).
      this.aim();
      return;
    }
    if (reaim) this.aim();
    if (status === END || status < 0) {
      // Its unfinished character, if any, is the session's end to write (U+FFFD, as for any job
      // read): it no longer keeps the other stream from being spliced.
      pipe.destroy();
      this.afterDrain();
    }
  }
}

/** Where a batch goes on to the session: `spooled`, its whole characters are in the spool (its unfinished tail is not). */
export type Deliver = (stream: Stream, chunk: Buffer, spooled: boolean) => void;

/**
 * A job's output pipe as the launch's wiring sees it (in place of a net.Socket): held and let go
 * by a restart, its descriptor handed on, destroyed once at its end ('close' follows).
 */
export class SplicedPipe extends EventEmitter {
  private handle: SplicedHandle | undefined;
  destroyed = false;

  constructor(
    readonly fd: number,
    private readonly gone: (pipe: SplicedPipe) => void,
  ) {
    super();
  }

  attach(handle: SplicedHandle): void {
    this.handle = handle;
  }

  /** Stop taking its output (it waits in the pipe) until the returned resume: a restart's quiet moment. */
  hold(): () => void {
    this.handle?.pause();
    return () => {
      if (!this.destroyed) this.handle?.resume();
    };
  }

  /**
   * Stop, say 'close' (on the next tick, as a socket does), and close the descriptor once this
   * turn is over: at a job's end its pipes end just before its exit is told, and the exec that
   * waits for that end answers first (docs/benchmarks.md, the exec round trip). Stopped here, it
   * is read no more; it is no longer handed on by a restart (`destroyed`).
   */
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.handle?.close();
    this.handle = undefined;
    // Synchronously, while the descriptor is still open: its owner may read out what is left (runner/launch/tap.ts).
    this.emit('closing', this.fd);
    setImmediate(closeQuietly, this.fd);
    this.gone(this);
    process.nextTick(() => this.emit('close'));
    return this;
  }
}
