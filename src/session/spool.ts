import { isAscii } from 'node:buffer';
import { closeSync, constants, fstatSync, openSync, readFileSync, readSync, renameSync, rmSync, statSync, truncateSync, writev } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import type { DiskHealth, WriteKind } from './disk.js';
import { capText } from './chunks.js';

/** Output not yet written is held up to this much (or maxBytes, if less), newest kept. */
const MAX_BACKLOG = 8 * 1024 * 1024;
/** Disk budget per session: 16 MiB/s after a first 8 MiB; a faster stream keeps only its newest part on disk. */
const WRITE_BYTES_PER_MS = (16 * 1024 * 1024) / 1000;
const WRITE_BURST = 8 * 1024 * 1024;
/**
 * Output waiting to be written, all spools together: when several sessions outrun the disk at
 * once, each keeps an equal share of this (never less than MIN_BACKLOG), so the daemon's memory
 * does not grow by MAX_BACKLOG for every fast session (4 at once held 32 MiB of reads, the most
 * of what the daemon's RSS grew by in the capture bench).
 */
const TOTAL_BACKLOG = 16 * 1024 * 1024;
const MIN_BACKLOG = 1024 * 1024;
/** Bytes waiting in every spool, and how many spools have any. */
const waiting = { bytes: 0, spools: 0 };

/** Output waiting to be written in every spool of this daemon (diagnostics, tests). */
export function backlogBytes(): number {
  return waiting.bytes;
}

/**
 * Output waiting to be written is copied into blocks of this size, taken from one free list and
 * given back once written or dropped: the bytes a spool is handed are the daemon's read buffer,
 * reused by the next read (runner/launch/pipes.ts), and a block per read would be a new buffer
 * outside V8's heap per read, whose pressure brings full collections while output is fast.
 */
const BLOCK_BYTES = 64 * 1024;
/** Blocks kept for the next writes, at most (4 MiB); more are left to the collector. */
const MAX_FREE_BLOCKS = 64;
const freeBlocks: Buffer[] = [];

/** A block of output, and how many parts of a batch, writes in flight and fillers hold it. */
interface Block {
  buf: Buffer;
  refs: number;
}

/** Bytes [start, end) of a block, waiting to be written. */
interface Part {
  block: Block;
  start: number;
  end: number;
}

function takeBlock(): Block {
  return { buf: freeBlocks.pop() ?? Buffer.allocUnsafeSlow(BLOCK_BYTES), refs: 1 };
}

function release(block: Block): void {
  if (--block.refs === 0 && freeBlocks.length < MAX_FREE_BLOCKS) freeBlocks.push(block.buf);
}

/** Blocks on the free list (tests). */
export function freeBlockCount(): number {
  return freeBlocks.length;
}

/** Buffers per writev call (IOV_MAX on Linux). */
const MAX_IOV = 1024;
/**
 * Bytes per writev call, at most: what is being written is held beside the backlog, which fills
 * again meanwhile, so this bounds what a fast session holds to its backlog's share and 1 MiB.
 */
const MAX_WRITE = 1024 * 1024;
/** After a write fails, output is counted as not spooled for this long; then writing is tried again. */
const RETRY_MS = 1000;

/** Why bytes are not in the spool, each counted on its own so a reader is told the true cause. */
export interface SpoolDrops {
  /** The spool keeps at most maxLogBytes: the oldest rotated away. */
  rotated: number;
  /** The stream outran the disk budget: the oldest of the backlog was dropped. */
  budget: number;
  /** The state directory refused a write (full, read-only, permissions). */
  fault: number;
}

export interface SpoolCounts {
  totalBytes: number;
  droppedBytes: number;
  dropped?: SpoolDrops;
  /** The last write error, if any output was not spooled because of one. */
  fault?: string;
}

/**
 * A session's whole output spooled to disk, newest kept: two segments (`<file>` and
 * `<file>.1`) of at most half of `maxBytes` each, so the spool never holds more than
 * `maxBytes` and what rotated away is counted. Writes are batched (writev, no copies) and run
 * off the main thread. A stream faster than the disk budget (16 MiB/s) keeps only its newest
 * part: memory is bounded by the backlog limit, and what was dropped is counted. A write that
 * fails drops what was pending (counted, with the error), and writing resumes by itself once
 * the directory takes writes again; what is on disk is always one contiguous run of output.
 */
export class Spool {
  private fd: number | undefined;
  private batch: Part[] = [];
  /** The block new output is copied into, from `fillAt` on (it holds a reference of its own). */
  private fill: Block | undefined;
  private fillAt = 0;
  private waitingBytes = 0;

  /** Bytes in the batch; the count of all spools follows. */
  private get batchBytes(): number {
    return this.waitingBytes;
  }

  private set batchBytes(n: number) {
    waiting.bytes += n - this.waitingBytes;
    if (this.waitingBytes === 0 && n > 0) waiting.spools++;
    else if (this.waitingBytes > 0 && n === 0) waiting.spools--;
    this.waitingBytes = n;
  }
  private flushing = false;
  private segmentBytes = 0;
  private closed = false;
  private ending = false;
  /** Forgotten: nothing is written, opened or created again. */
  private removed = false;
  /** Bytes went missing after what is on disk (the cause): the disk copy is discarded before the next write. */
  private gap: keyof SpoolDrops | undefined;
  private tokens = WRITE_BURST;
  private tokensAt = Date.now();
  private hold: NodeJS.Timeout | undefined;
  private idle: (() => void)[] = [];
  /** Until when output is counted as not spooled, after a failed write. */
  private faultUntil = 0;
  readonly dropped: SpoolDrops = { rotated: 0, budget: 0, fault: 0 };
  totalBytes = 0;
  /** The last write error, kept so `log` can say why output is missing. */
  fault: string | undefined;

  constructor(
    readonly file: string,
    readonly maxBytes: number,
    private readonly disk?: DiskHealth,
  ) {}

  /** The spool of a finished session from the last run: read-only. */
  static restore(file: string, counts: SpoolCounts | undefined): Spool | undefined {
    let onDisk = 0;
    for (const f of [file, `${file}.1`]) {
      try {
        onDisk += statSync(f).size;
      } catch {
        // no such segment
      }
    }
    if (!counts && onDisk === 0) return undefined;
    const spool = new Spool(file, 0);
    spool.closed = true;
    Object.assign(spool.dropped, counts?.dropped ?? { rotated: counts?.droppedBytes ?? 0 });
    spool.fault = counts?.fault;
    // A record written before the spool's last writes (a crash) undercounts: trust the disk then.
    spool.totalBytes = Math.max(counts?.totalBytes ?? 0, onDisk + spool.droppedBytes);
    return spool;
  }

  /**
   * The spool of a session the last image handed over (SPEC §19): written on where it stopped,
   * its counts as they were, its current segment as long as it is on disk.
   */
  static resume(file: string, maxBytes: number, disk: DiskHealth | undefined, counts: SpoolCounts): Spool {
    const spool = new Spool(file, maxBytes, disk);
    Object.assign(spool.dropped, counts.dropped ?? { rotated: counts.droppedBytes });
    spool.fault = counts.fault;
    spool.totalBytes = counts.totalBytes;
    try {
      spool.segmentBytes = statSync(file).size;
    } catch {
      // not made yet: nothing was spooled
    }
    return spool;
  }

  /** Bytes of output not in the spool, whatever the cause. */
  get droppedBytes(): number {
    return this.dropped.rotated + this.dropped.budget + this.dropped.fault;
  }

  counts(): SpoolCounts {
    return { totalBytes: this.totalBytes, droppedBytes: this.droppedBytes, dropped: { ...this.dropped }, ...(this.fault ? { fault: this.fault } : {}) };
  }

  write(data: Buffer | string): void {
    if (this.closed || this.maxBytes <= 0) return;
    let buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    this.totalBytes += buf.length;
    if (this.faultUntil > 0) {
      if (Date.now() < this.faultUntil) {
        this.dropped.fault += buf.length;
        return;
      }
      this.faultUntil = 0;
    }
    // Bounded memory: a backlog past the limit drops its oldest bytes (counted) instead of growing;
    // while others wait too, the limit is this spool's share of what all may hold. Dropped before
    // the copy, so only what the limit keeps is copied.
    const spools = waiting.spools + (this.waitingBytes === 0 ? 1 : 0);
    const limit = Math.min(MAX_BACKLOG, this.maxBytes, Math.max(MIN_BACKLOG, Math.floor(TOTAL_BACKLOG / spools)));
    const excess = this.batchBytes + buf.length - limit;
    if (excess > 0) {
      this.dropped.budget += excess;
      this.gap = 'budget';
      const old = Math.min(excess, this.batchBytes);
      this.dropOldest(old);
      const cut = excess - old;
      if (cut > 0) buf = buf.subarray(cut);
    }
    this.copyIn(buf);
    if (!this.flushing) this.flush();
  }

  /** Copy bytes to the end of the batch, into the fill block and fresh ones. */
  private copyIn(buf: Buffer): void {
    let from = 0;
    while (from < buf.length) {
      if (!this.fill || this.fillAt === BLOCK_BYTES) {
        if (this.fill) release(this.fill);
        this.fill = takeBlock();
        this.fillAt = 0;
      }
      const block = this.fill;
      const n = buf.copy(block.buf, this.fillAt, from, Math.min(buf.length, from + BLOCK_BYTES - this.fillAt));
      const last = this.batch[this.batch.length - 1];
      if (last && last.block === block && last.end === this.fillAt) last.end += n;
      else {
        block.refs++;
        this.batch.push({ block, start: this.fillAt, end: this.fillAt + n });
      }
      this.fillAt += n;
      from += n;
    }
    this.batchBytes += buf.length;
  }

  /** Drop the oldest `bytes` of the batch (the caller counts why). */
  private dropOldest(bytes: number): void {
    this.batchBytes -= bytes;
    while (bytes > 0) {
      const p = this.batch[0];
      const len = p.end - p.start;
      if (len > bytes) {
        p.start += bytes;
        return;
      }
      bytes -= len;
      this.batch.shift();
      release(p.block);
    }
  }

  /** Let go of everything waiting, and of the fill block. */
  private clearBatch(): void {
    for (const p of this.batch) release(p.block);
    this.batch = [];
    this.batchBytes = 0;
    this.letGoFill();
  }

  private letGoFill(): void {
    if (this.fill) release(this.fill);
    this.fill = undefined;
    this.fillAt = 0;
  }

  private flush(): void {
    if (this.removed || (this.closed && !this.ending)) {
      // nothing more is written
      this.clearBatch();
    }
    if (this.batch.length === 0) {
      // Idle: no block is held (a quiet session keeps none).
      this.letGoFill();
      this.flushing = false;
      if (this.removed) this.closeFd();
      for (const fn of this.idle.splice(0)) fn();
      return;
    }
    this.flushing = true;
    const now = Date.now();
    this.tokens = Math.min(WRITE_BURST, this.tokens + (now - this.tokensAt) * WRITE_BYTES_PER_MS);
    this.tokensAt = now;
    const wait = this.ending ? 0 : Math.ceil(-this.tokens / WRITE_BYTES_PER_MS);
    if (wait > 0) {
      // Over the disk budget: wait; meanwhile the backlog keeps the newest output.
      this.hold ??= setTimeout(() => {
        this.hold = undefined;
        this.flush();
      }, wait);
      return;
    }
    // Up to the end of the current segment, so no segment outgrows half the cap, and MAX_WRITE; no copying.
    const room = Math.min(MAX_WRITE, Math.max(1, Math.floor(this.maxBytes / 2) - this.segmentBytes));
    const take: Buffer[] = [];
    const held: Block[] = [];
    let bytes = 0;
    while (this.batch.length > 0 && bytes < room && take.length < MAX_IOV) {
      const p = this.batch[0];
      const len = p.end - p.start;
      if (bytes + len <= room) {
        take.push(p.block.buf.subarray(p.start, p.end));
        held.push(p.block);
        this.batch.shift();
        bytes += len;
      } else {
        const end = p.start + room - bytes;
        take.push(p.block.buf.subarray(p.start, end));
        p.block.refs++;
        held.push(p.block);
        p.start = end;
        bytes = room;
      }
    }
    this.batchBytes -= bytes;
    // The written blocks go back to the free list once the write is over, whatever its outcome.
    const done = () => {
      for (const b of held) release(b);
    };
    try {
      if (this.gap) this.discardWritten(this.gap);
      this.open();
    } catch (err) {
      done();
      return this.fail('file', err as Error, bytes);
    }
    // At the segment's end, which the spool keeps itself: a splicing reader writes there too (no O_APPEND, which splice refuses).
    writev(this.fd!, take, this.segmentBytes, (err) => {
      done();
      if (err) return this.fail('data', err, bytes);
      this.disk?.succeeded('data');
      this.segmentBytes += bytes;
      this.tokens -= bytes;
      if (this.segmentBytes >= this.maxBytes / 2 && !this.removed) this.rotate();
      this.flush();
    });
  }

  /** The current segment, open for writing at explicit offsets and for reading back (a splice's bytes). */
  private open(): number {
    if (this.fd === undefined) {
      this.fd = openSync(this.file, constants.O_RDWR | constants.O_CREAT, 0o600);
      this.disk?.succeeded('file');
    }
    return this.fd;
  }

  /**
   * Where a reader that splices (runner/launch/splice.ts) may put output now, in the kernel: the
   * current segment, its end, and how many bytes it may take (up to the segment's end and within
   * the disk budget). Undefined while output waits to be written here or writes are refused for
   * a moment: then the reader hands output to `write` (today's path, which keeps the budget's
   * newest part and counts what it drops), and asks again once the spool is `drained`.
   */
  spliceAt(): { fd: number; offset: number; room: number } | undefined {
    if (this.closed || this.removed || this.maxBytes <= 0 || this.flushing || this.batch.length > 0) return undefined;
    if (this.faultUntil > 0) {
      if (Date.now() < this.faultUntil) return undefined;
      this.faultUntil = 0;
    }
    const now = Date.now();
    this.tokens = Math.min(WRITE_BURST, this.tokens + (now - this.tokensAt) * WRITE_BYTES_PER_MS);
    this.tokensAt = now;
    if (this.tokens < 1) return undefined;
    const half = Math.floor(this.maxBytes / 2);
    if (this.segmentBytes >= half) this.rotate();
    if (this.faultUntil > 0) return undefined; // the rotation failed
    let fd: number;
    try {
      if (this.gap) this.discardWritten(this.gap);
      fd = this.open();
    } catch (err) {
      this.fail('file', err as Error, 0);
      return undefined;
    }
    return { fd, offset: this.segmentBytes, room: Math.max(1, Math.min(half - this.segmentBytes, Math.floor(this.tokens))) };
  }

  /**
   * `n` bytes were spliced at the end of the segment `spliceAt` gave: counted as written. True when
   * that segment is full and was rotated: the reader asks `spliceAt` again before splicing more.
   * Bytes spliced past them and not counted (a character's first bytes) are written over by the next write.
   */
  spliced(n: number): boolean {
    this.totalBytes += n;
    this.segmentBytes += n;
    this.tokens -= n;
    if (this.fault !== undefined) this.disk?.succeeded('data');
    if (this.segmentBytes < this.maxBytes / 2 || this.removed) return false;
    this.rotate();
    return true;
  }

  /**
   * A planned restart's quiet moment, after `settle`: the segment on disk is cut back to what the
   * spool counts. A splicing reader leaves the first bytes of a character it took apart out of
   * the count (the capture holds them, and a restart hands them on: session/carry.ts); they may
   * still lie past it, and the next image resumes at the file's size, so they would be there twice.
   * Not at a shutdown or a crash: with no capture to hand them on, the bytes on disk are all there is.
   */
  trimToCount(): void {
    if (this.closed || this.removed || this.maxBytes <= 0) return;
    try {
      if (statSync(this.file).size > this.segmentBytes) truncateSync(this.file, this.segmentBytes);
    } catch {
      // no segment yet, or none to cut: the next write says what is wrong
    }
  }

  /** A splice into the segment failed (a full disk, a read-only file system): counted as a write fault, as `write`'s are. */
  spliceFailed(err: Error): void {
    this.fail('data', err, 0);
  }

  /** Drop both segments (counted as `cause`), so the spool stays one contiguous run of the newest output. */
  private discardWritten(cause: keyof SpoolDrops): void {
    this.closeFd();
    for (const f of [this.file, `${this.file}.1`]) {
      let size: number;
      try {
        size = statSync(f).size;
      } catch {
        continue; // not written yet
      }
      rmSync(f, { force: true });
      this.dropped[cause] += size;
    }
    this.gap = undefined;
    this.segmentBytes = 0;
  }

  private rotate(): void {
    try {
      this.closeFd();
      const previous = `${this.file}.1`;
      let size = 0;
      try {
        size = statSync(previous).size;
      } catch {
        // no previous segment yet
      }
      renameSync(this.file, previous);
      this.dropped.rotated += size;
      this.segmentBytes = 0;
    } catch (err) {
      this.fail('file', err as Error, 0);
    }
  }

  /**
   * A write failed: what was being written and what waits are not spooled (counted, with the
   * error), and so is new output for a moment; then writing is tried again.
   */
  private fail(kind: WriteKind, err: Error, inFlight: number): void {
    this.closeFd();
    this.fault = err.message;
    this.dropped.fault += inFlight + this.batchBytes;
    this.clearBatch();
    this.gap = 'fault';
    this.faultUntil = Date.now() + RETRY_MS;
    this.flushing = false;
    this.disk?.failed(kind, err, `the output spool ${this.file}`);
    for (const fn of this.idle.splice(0)) fn();
  }

  private closeFd(): void {
    if (this.fd === undefined) return;
    // A splicing reader lets go of the number first: closed, it may name another file at the next open.
    this.onFdClosed?.();
    try {
      closeSync(this.fd);
    } catch {
      // already closed
    }
    this.fd = undefined;
  }

  /** Told when the segment's descriptor is closed (a rotation, a fault, the end): a splicing reader stops naming it. */
  onFdClosed: (() => void) | undefined;

  /** True while output is being counted as not spooled after a failed write. */
  get faulted(): boolean {
    return this.faultUntil > 0;
  }

  /** Resolves once everything written so far is on disk. */
  drained(): Promise<void> {
    if (!this.flushing) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  /**
   * Write what waits now, past the disk budget, and resolve once it is on disk; writing goes on
   * as before afterwards (a restart's quiet moment, SPEC §19: the next image appends after it).
   */
  async settle(): Promise<void> {
    const was = this.ending;
    this.ending = true;
    if (this.hold) {
      clearTimeout(this.hold);
      this.hold = undefined;
      this.flush();
    }
    await this.drained();
    this.ending = was;
  }

  async close(): Promise<void> {
    await this.settle();
    this.closed = true;
    this.closeFd();
  }

  /** Everything the spool holds, oldest first, decoded. */
  read(): string {
    const parts: Buffer[] = [];
    for (const f of [`${this.file}.1`, this.file]) {
      try {
        parts.push(readFileSync(f));
      } catch {
        // a segment that does not exist yet
      }
    }
    return Buffer.concat(parts).toString('utf8');
  }

  /**
   * Lines [from, to) of what the spool holds (`lines(total)` says which, given how many there
   * are), read in blocks: the whole spool is never in memory at once, and of the page only its
   * newest (`fromEnd`) or first `cap` characters are decoded. Characters count UTF-16 units, as
   * the decoded text's length would.
   */
  page(lines: (total: number) => { from: number; to: number }, cap: number, fromEnd: boolean, block = BLOCK): SpoolPage {
    const parts: { fd: number; size: number }[] = [];
    try {
      for (const f of [`${this.file}.1`, this.file]) {
        let fd: number;
        try {
          fd = openSync(f, 'r');
        } catch {
          continue; // a segment that does not exist yet
        }
        parts.push({ fd, size: fstatSync(fd).size });
      }
      return pageOf(parts, lines, cap, fromEnd, block);
    } finally {
      for (const p of parts) closeSync(p.fd);
    }
  }

  /**
   * Stop for good (the session is forgotten; its files are deleted by whoever forgets it). A
   * write in flight finishes into the deleted file and its descriptor is closed then, never
   * before: closing under a pending write could hand its number to another file.
   */
  remove(): void {
    this.removed = true;
    this.closed = true;
    clearTimeout(this.hold);
    this.hold = undefined;
    this.clearBatch();
    if (!this.flushing) this.closeFd();
  }
}

/** A page of the spool: its text, where it lies, and how much of it the cap cut. */
export interface SpoolPage {
  output: string;
  from: number;
  to: number;
  totalLines: number;
  /** Characters the whole spool holds, and before the page. */
  totalChars: number;
  start: number;
  /** Characters of the page not in `output` (past the cap): the oldest of a tail page, else the last. */
  cut: number;
}

/** How much of the spool is read at a time. */
const BLOCK = 1 << 20;

function pageOf(parts: { fd: number; size: number }[], lines: (total: number) => { from: number; to: number }, cap: number, fromEnd: boolean, BLOCK: number): SpoolPage {
  const size = parts.reduce((n, p) => n + p.size, 0);
  const buf = Buffer.allocUnsafe(BLOCK);
  /** Bytes [pos, pos + len) of the segments as one file, into buf. */
  const read = (pos: number, len: number, into = buf): Buffer => {
    let got = 0;
    let base = 0;
    for (const p of parts) {
      if (got < len && pos + got < base + p.size) {
        const at = pos + got - base;
        got += readSync(p.fd, into, got, Math.min(len - got, p.size - at), at);
      }
      base += p.size;
    }
    return into.subarray(0, got);
  };
  /** Walk every block: `each(block, pos)`; counts characters with one decoder across blocks. */
  const walk = (until: number, each: (block: Buffer, pos: number, charsBefore: number, decoder: StringDecoder) => boolean): number => {
    const decoder = new StringDecoder('utf8');
    let chars = 0;
    for (let pos = 0; pos < until; pos += BLOCK) {
      const block = read(pos, Math.min(BLOCK, until - pos));
      if (!each(block, pos, chars, decoder)) return chars;
      chars += isAscii(block) ? block.length : decoder.write(block).length;
    }
    return chars + decoder.end().length;
  };
  // First pass: how many lines and characters.
  let newlines = 0;
  let last = -1;
  const totalChars = walk(size, (block) => {
    for (let i = block.indexOf(10); i !== -1; i = block.indexOf(10, i + 1)) newlines++;
    if (block.length > 0) last = block[block.length - 1];
    return true;
  });
  const totalLines = size === 0 ? 0 : last === 10 ? newlines : newlines + 1;
  const { from, to } = lines(totalLines);
  // Second pass: the byte after the k-th newline, and the characters up to it.
  const afterNewline = (k: number): { byte: number; chars: number } => {
    if (k === 0) return { byte: 0, chars: 0 };
    if (k > newlines) return { byte: size, chars: totalChars };
    let seen = 0;
    let hit = { byte: size, chars: totalChars };
    walk(size, (block, pos, charsBefore, decoder) => {
      for (let i = block.indexOf(10); i !== -1; i = block.indexOf(10, i + 1)) {
        if (++seen < k) continue;
        const head = block.subarray(0, i + 1);
        // With the walk's decoder: it may hold the start of a character this block ends.
        hit = { byte: pos + i + 1, chars: charsBefore + decoder.write(head).length };
        return false;
      }
      return true;
    });
    return hit;
  };
  const start = afterNewline(Math.min(from, newlines));
  if (from >= to) return { output: '', from, to, totalLines, totalChars, start: start.chars, cut: 0 };
  // The page ends before the newline that ends its last line, or at the end of the spool.
  const end = to > newlines ? { byte: size, chars: totalChars } : ((e) => ({ byte: e.byte - 1, chars: e.chars - 1 }))(afterNewline(to));
  const pageChars = end.chars - start.chars;
  // A UTF-16 unit takes one to three bytes: 3 x cap bytes and one character more hold cap units.
  const want = Math.min(end.byte - start.byte, cap * 3 + 4);
  const pos = fromEnd ? end.byte - want : start.byte;
  const bytes = read(pos, want, Buffer.allocUnsafe(want));
  let text: string;
  if (want === end.byte - start.byte) text = bytes.toString('utf8');
  else if (fromEnd) {
    // Read from inside the page: not from inside a character (its continuation bytes are skipped).
    let k = 0;
    while (k < 3 && k < bytes.length && (bytes[k] & 0xc0) === 0x80) k++;
    text = bytes.subarray(k).toString('utf8');
  } else text = new StringDecoder('utf8').write(bytes); // a character cut at the end is held, not replaced
  const output = capText(text, cap, fromEnd);
  return { output, from, to, totalLines, totalChars, start: start.chars, cut: pageChars - output.length };
}
