import { EventEmitter } from 'node:events';
import { constants as os } from 'node:os';
import { closeQuietly } from '../../base/close-quietly.js';
import { incompleteTailLength as incompleteTail, type Stream } from '../../session/output.js';
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
 * buffer and the bytes given to the spool's write, as before; once it is drained the pipes are
 * spliced again. A file system that refuses splice turns the session to reading for good.
 */
export class SpliceRoute {
  private readonly target: SpliceTarget;
  /** The target is the spool's file (else: reading, or not asked yet). */
  private splicing = false;
  private refused = false;
  /** Waiting for the spool to drain, to splice again. */
  private waiting = false;
  private readonly pipes = new Set<SplicedPipe>();
  /**
   * Per stream, the first bytes of a character not yet whole: held back from the spool until the
   * rest comes, so a character stays whole there when the other stream writes between its bytes
   * (as the spool's own per-stream writes keep it). While any is held, the pipes are read.
   */
  private readonly partial = new Map<Stream, Buffer>();

  constructor(
    private readonly addon: Splicer,
    private readonly spool: Spool,
    private readonly buffer: Buffer,
  ) {
    this.target = addon.spliceTarget();
    // The spool closed its segment (a rotation, a fault, its end): the next batch asks again where to go.
    spool.onFdClosed = () => {
      if (!this.splicing) return;
      this.splicing = false;
      this.target.set(ASK);
    };
  }

  /** Splice one of the job's pipes (it is the caller's to hand over; closed by `destroy`). */
  pipe(fd: number, stream: Stream, deliver: (stream: Stream, chunk: Buffer) => void): SplicedPipe {
    const pipe = new SplicedPipe(fd, (p) => this.pipes.delete(p));
    this.pipes.add(pipe);
    pipe.attach(this.addon.splicePipe(fd, this.target, this.buffer, (n, status) => this.batch(pipe, stream, n, status, deliver)));
    return pipe;
  }

  /** Point the target at the spool's end, or at reading while the spool cannot take a splice. */
  private aim(): void {
    const at = this.refused ? undefined : this.spool.spliceAt();
    this.splicing = at !== undefined;
    if (at) this.target.set(at.fd, at.offset, at.room);
    else this.target.set(-1);
  }

  /** Once the spool has written what it was given, splice again. */
  private afterDrain(): void {
    if (this.waiting || this.refused) return;
    this.waiting = true;
    void this.spool.drained().then(() => {
      this.waiting = false;
      if (!this.splicing && this.partial.size === 0 && this.pipes.size > 0) this.aim();
    });
  }

  private batch(pipe: SplicedPipe, stream: Stream, n: number, status: number, deliver: (stream: Stream, chunk: Buffer) => void): void {
    const spliced = this.splicing;
    let reaim = status === ROOM;
    if (n > 0) {
      const chunk = this.buffer.subarray(0, n);
      if (spliced) {
        const rotated = this.spool.spliced(n);
        reaim = rotated || reaim;
        const cut = rotated ? 0 : incompleteTail(chunk);
        if (cut > 0 && this.spool.unsplice(cut)) {
          this.partial.set(stream, Buffer.from(chunk.subarray(n - cut)));
          this.splicing = false;
          this.target.set(-1);
          reaim = false;
          this.afterDrain();
        }
      } else {
        this.writeWhole(stream, chunk);
        this.afterDrain();
      }
      // The spool is aimed again before the session hears of the chunk: a rotation closed the file the target names.
      if (reaim && status >= 0) {
        this.aim();
        reaim = false;
      }
      deliver(stream, chunk);
    }
    if (status < 0 && spliced) {
      const code = -status;
      const name = Object.entries(os.errno).find(([, v]) => v === code)?.[0] ?? `errno ${code}`;
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
      // The stream ended inside a character: its bytes go to the spool as they came.
      const held = this.partial.get(stream);
      if (held) {
        this.partial.delete(stream);
        this.spool.write(held);
      }
      pipe.destroy();
    }
  }

  /** Read output to the spool's write, whole characters only: a stream's unfinished one waits for its rest. */
  private writeWhole(stream: Stream, chunk: Buffer): void {
    const held = this.partial.get(stream);
    const data = held ? Buffer.concat([held, chunk]) : chunk;
    const cut = incompleteTail(data);
    if (cut > 0) this.partial.set(stream, Buffer.from(data.subarray(data.length - cut)));
    else this.partial.delete(stream);
    if (data.length > cut) this.spool.write(data.subarray(0, data.length - cut));
  }
}

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

  /** Stop, close the descriptor, and say 'close' (on the next tick, as a socket does). */
  destroy(): this {
    if (this.destroyed) return this;
    this.destroyed = true;
    this.handle?.close();
    this.handle = undefined;
    closeQuietly(this.fd);
    this.gone(this);
    process.nextTick(() => this.emit('close'));
    return this;
  }
}
