import { closeSync, openSync, readFileSync, renameSync, rmSync, statSync, writev } from 'node:fs';

/** Output not yet written is held up to this much (or maxBytes, if less), newest kept. */
const MAX_BACKLOG = 8 * 1024 * 1024;
/** Disk budget per session: 16 MiB/s after a first 8 MiB; a faster stream keeps only its newest part on disk. */
const WRITE_BYTES_PER_MS = (16 * 1024 * 1024) / 1000;
const WRITE_BURST = 8 * 1024 * 1024;
/** Buffers per writev call (IOV_MAX on Linux). */
const MAX_IOV = 1024;

/**
 * A session's whole output spooled to disk, newest kept: two segments (`<file>` and
 * `<file>.1`) of at most half of `maxBytes` each, so the spool never holds more than
 * `maxBytes` and what rotated away is counted. Writes are batched (writev, no copies) and run
 * off the main thread. A stream faster than the disk budget (16 MiB/s) keeps only its newest
 * part: memory is bounded by the backlog limit, and what was dropped is counted.
 */
export class Spool {
  private fd: number | undefined;
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private flushing = false;
  private segmentBytes = 0;
  private closed = false;
  private ending = false;
  /** Pending bytes were dropped: what is on disk no longer joins on, so it goes before the next write. */
  private gap = false;
  private tokens = WRITE_BURST;
  private tokensAt = Date.now();
  private hold: NodeJS.Timeout | undefined;
  private idle: (() => void)[] = [];
  /** Bytes that rotated out of the spool. */
  droppedBytes = 0;
  totalBytes = 0;
  failed: string | undefined;

  constructor(
    readonly file: string,
    private readonly maxBytes: number,
  ) {}

  /** The spool of a finished session from the last run: read-only. */
  static restore(file: string, counts: { totalBytes: number; droppedBytes: number } | undefined): Spool | undefined {
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
    // A record written before the spool's last writes (a crash) undercounts: trust the disk then.
    spool.totalBytes = Math.max(counts?.totalBytes ?? 0, onDisk + (counts?.droppedBytes ?? 0));
    spool.droppedBytes = counts?.droppedBytes ?? 0;
    return spool;
  }

  write(data: Buffer | string): void {
    if (this.closed || this.failed || this.maxBytes <= 0) return;
    const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
    this.batch.push(buf);
    this.batchBytes += buf.length;
    this.totalBytes += buf.length;
    // Bounded memory: a backlog past the limit drops its oldest bytes (counted) instead of growing.
    const limit = Math.min(MAX_BACKLOG, this.maxBytes);
    if (this.batchBytes > limit) {
      let excess = this.batchBytes - limit;
      this.batchBytes = limit;
      this.droppedBytes += excess;
      this.gap = true;
      while (excess >= this.batch[0].length) excess -= this.batch.shift()!.length;
      if (excess > 0) this.batch[0] = this.batch[0].subarray(excess);
    }
    if (!this.flushing) this.flush();
  }

  private flush(): void {
    if (this.closed && !this.ending) this.batch = []; // removed meanwhile: write nothing more
    if (this.batch.length === 0) {
      this.flushing = false;
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
    if (this.gap) this.discardWritten();
    // Up to the end of the current segment, so no segment outgrows half the cap; no copying.
    const room = Math.max(1, Math.floor(this.maxBytes / 2) - this.segmentBytes);
    const take: Buffer[] = [];
    let bytes = 0;
    while (this.batch.length > 0 && bytes < room && take.length < MAX_IOV) {
      const b = this.batch[0];
      if (bytes + b.length <= room) {
        take.push(b);
        this.batch.shift();
        bytes += b.length;
      } else {
        take.push(b.subarray(0, room - bytes));
        this.batch[0] = b.subarray(room - bytes);
        bytes = room;
      }
    }
    this.batchBytes -= bytes;
    try {
      this.fd ??= openSync(this.file, 'a', 0o600);
    } catch (err) {
      return this.fail(err as Error);
    }
    writev(this.fd, take, null, (err) => {
      if (err) return this.fail(err);
      this.segmentBytes += bytes;
      this.tokens -= bytes;
      if (this.segmentBytes >= this.maxBytes / 2) this.rotate();
      this.flush();
    });
  }

  /** Drop both segments (counted), so the spool stays one contiguous run of the newest output. */
  private discardWritten(): void {
    this.gap = false;
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    for (const f of [this.file, `${this.file}.1`]) {
      try {
        this.droppedBytes += statSync(f).size;
        rmSync(f, { force: true });
      } catch {
        // not written yet
      }
    }
    this.segmentBytes = 0;
  }

  private rotate(): void {
    try {
      closeSync(this.fd!);
      this.fd = undefined;
      const previous = `${this.file}.1`;
      try {
        this.droppedBytes += statSync(previous).size;
      } catch {
        // no previous segment yet
      }
      renameSync(this.file, previous);
      this.segmentBytes = 0;
    } catch (err) {
      this.fail(err as Error);
    }
  }

  private fail(err: Error): void {
    this.failed = err.message;
    this.flushing = false;
    this.batch = [];
    for (const fn of this.idle.splice(0)) fn();
  }

  /** Resolves once everything written so far is on disk. */
  drained(): Promise<void> {
    if (!this.flushing) return Promise.resolve();
    return new Promise((resolve) => this.idle.push(resolve));
  }

  async close(): Promise<void> {
    this.ending = true;
    if (this.hold) {
      clearTimeout(this.hold);
      this.hold = undefined;
      this.flush();
    }
    await this.drained();
    this.closed = true;
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
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

  remove(): void {
    this.closed = true;
    clearTimeout(this.hold);
    this.hold = undefined;
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    rmSync(this.file, { force: true });
    rmSync(`${this.file}.1`, { force: true });
  }
}
