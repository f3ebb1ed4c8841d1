import { closeSync, openSync, readFileSync, renameSync, rmSync, statSync, write } from 'node:fs';

/**
 * A session's whole output spooled to disk, newest kept: two segments (`<file>` and
 * `<file>.1`) of at most half of `maxBytes` each, so the spool never holds more than
 * `maxBytes` and what rotated away is counted. Writes are batched and run off the main thread.
 */
export class Spool {
  private fd: number | undefined;
  private batch: Buffer[] = [];
  private batchBytes = 0;
  private flushing = false;
  private segmentBytes = 0;
  private closed = false;
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
    if (!this.flushing) this.flush();
  }

  private flush(): void {
    if (this.batch.length === 0) {
      this.flushing = false;
      for (const fn of this.idle.splice(0)) fn();
      return;
    }
    this.flushing = true;
    let buf = this.batch.length === 1 ? this.batch[0] : Buffer.concat(this.batch, this.batchBytes);
    this.batch = [];
    this.batchBytes = 0;
    const segment = Math.max(1, Math.floor(this.maxBytes / 2));
    if (buf.length > this.maxBytes) {
      // More than the whole spool holds: only its newest part can stay.
      const skipped = buf.length - segment;
      this.droppedBytes += skipped;
      buf = buf.subarray(skipped);
    }
    const room = segment - this.segmentBytes;
    if (buf.length > room) {
      // Fill this segment exactly; the rest goes first in the next flush, after the rotation.
      this.batch.unshift(buf.subarray(room));
      this.batchBytes += buf.length - room;
      buf = buf.subarray(0, room);
    }
    try {
      this.fd ??= openSync(this.file, 'a', 0o600);
    } catch (err) {
      return this.fail(err as Error);
    }
    write(this.fd, buf, 0, buf.length, null, (err) => {
      if (err) return this.fail(err);
      this.segmentBytes += buf.length;
      if (this.segmentBytes >= segment) this.rotate();
      this.flush();
    });
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
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    rmSync(this.file, { force: true });
    rmSync(`${this.file}.1`, { force: true });
  }
}
