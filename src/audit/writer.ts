import { appendFileSync, closeSync, mkdirSync, openSync, statSync, unlinkSync, write, writeSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { AuditBus, AuditEvent } from './events.js';
import { fileName, readTail, trailFiles, type TrailFile } from './files.js';
import { GENESIS, hashOf, lineOf, parseRecord } from './line.js';

/** What bounds the trail (config `audit.*`). */
export interface TrailLimits {
  enabled: boolean;
  maxBytes: number;
  days: number;
}

/** What the trail's own records say (type "audit"): it went on after a torn line, it removed a file, it lost records. */
type TrailNote =
  | { type: 'audit'; event: 'torn'; file: string; line: number; bytes: number }
  | { type: 'audit'; event: 'removed'; file: string; why: 'maxBytes' | 'days'; bytes: number; lastSeq: number; lastHash: string }
  | { type: 'audit'; event: 'lost'; records: number; why: string };

/** Events waiting for the next write; past this, new ones are dropped and counted (a 'lost' record says how many). */
const MAX_QUEUED = 100_000;
/** Lines built but not written (the disk refuses); past this they are dropped and counted. */
const MAX_UNWRITTEN_BYTES = 8 * 1024 * 1024;
const RETRY_MS = 1000;
/**
 * How long an event waits for others to share its write: one append per 25 ms at most, rather
 * than one per turn of the event loop, which cost a write (and a trip through libuv's threads)
 * per record. Past BATCH_EVENTS queued, the write goes at once.
 */
const FLUSH_MS = 25;
const BATCH_EVENTS = 1000;
const DAY_MS = 86_400_000;
/** How often the age bound is looked at besides each rotation. */
const AGE_CHECK_MS = 3_600_000;

/** One file of the trail holds about an eighth of the bound, so removing the oldest frees little at a time. */
export const fileBytesFor = (maxBytes: number) => Math.min(32 * 1024 * 1024, Math.max(4096, Math.floor(maxBytes / 8)));

export interface TrailStatus {
  enabled: boolean;
  dir: string;
  files: number;
  bytes: number;
  records: number;
  /** Writes the disk refused (each retried), and records that were given up on. */
  failedWrites: number;
  lostRecords: number;
  writable: boolean;
  error?: string;
}

/**
 * The audit trail's writer (SPEC §18): one JSON line per event under `<state>/audit`, each
 * naming the hash of the line before it. Off the request's path: an event is queued as it
 * happens and the queue is written in one append on the next turn of the event loop (one
 * descriptor, no fsync: a crash of the daemon loses what is queued, a crash of the machine also
 * what the kernel had not written). A write the disk refuses is retried and counted; the daemon
 * never stops for it.
 */
export class AuditTrail {
  private limits: TrailLimits;
  private files: (TrailFile & { bytes: number })[] = [];
  private fd: number | undefined;
  private seq = 0;
  /** Hash of the last line built (the next line's prev) and of the last one written. */
  private head = GENESIS;
  private written = { seq: 0, hash: GENESIS };
  private queue: { at: number; body: AuditEvent | TrailNote }[] = [];
  private dropped = 0;
  /** Built lines the disk refused, written again before anything newer. */
  private unwritten: { text: string; seq: number; hash: string; records: number } | undefined;
  private scheduled: NodeJS.Timeout | 'now' | undefined;
  private writing = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private ageTimer: NodeJS.Timeout | undefined;
  private unlisten: (() => void) | undefined;
  private failedWrites = 0;
  private lostRecords = 0;
  private fault: string | undefined;
  private closed = false;
  private flushedWaiters: (() => void)[] = [];

  constructor(
    readonly dir: string,
    limits: TrailLimits,
    private readonly log: Logger,
  ) {
    this.limits = limits;
  }

  /** Open the trail, carry its chain on from its last whole record (saying so after a torn line), and listen. */
  open(bus: AuditBus): void {
    if (!this.limits.enabled) return;
    try {
      mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      this.files = trailFiles(this.dir).map((f) => ({ ...f, bytes: statSync(f.path).size }));
      this.recoverHead();
      const last = this.files.at(-1);
      if (!last || last.bytes >= fileBytesFor(this.limits.maxBytes)) this.startFile((last?.n ?? 0) + 1);
      else this.fd = openSync(last.path, 'a', 0o600);
    } catch (err) {
      this.failed(err as Error);
    }
    this.enforceBounds();
    this.unlisten = bus.listen((e) => this.add(e));
    this.ageTimer = setInterval(() => this.enforceBounds(), AGE_CHECK_MS);
    this.ageTimer.unref();
  }

  /** A reload: new bounds apply from the next write (turning it off or on needs a restart). */
  setLimits(limits: TrailLimits): void {
    this.limits = { ...limits, enabled: this.limits.enabled };
  }

  get enabled(): boolean {
    return this.limits.enabled;
  }

  /** The last record written: verify compares the trail's last line with it. */
  lastWritten(): { seq: number; hash: string } {
    return { ...this.written };
  }

  status(): TrailStatus {
    const bytes = this.files.reduce((n, f) => n + f.bytes, 0);
    return {
      enabled: this.limits.enabled,
      dir: this.dir,
      files: this.files.length,
      bytes,
      records: this.written.seq,
      failedWrites: this.failedWrites,
      lostRecords: this.lostRecords,
      writable: this.fault === undefined,
      ...(this.fault === undefined ? {} : { error: this.fault }),
    };
  }

  private add(e: AuditEvent | TrailNote): void {
    if (e.type === 'exec_request' || this.closed) return;
    // A job retrying a refused host writes one line for it, not one per retry: the end has the count.
    if (e.type === 'network_refused' && !e.first) return;
    if (this.queue.length >= MAX_QUEUED) {
      this.dropped++;
      return;
    }
    this.queue.push({ at: Date.now(), body: e });
    if (this.scheduled === undefined) this.scheduled = setTimeout(() => this.flush(), FLUSH_MS);
    else if (this.queue.length >= BATCH_EVENTS) this.soon();
  }

  /** Write on the next turn rather than at the timer. */
  private soon(): void {
    if (this.scheduled === 'now') return;
    clearTimeout(this.scheduled);
    this.scheduled = 'now';
    setImmediate(() => this.flush());
  }

  /** Everything queued so far is written (or given up on): for verify and tests. */
  flushed(): Promise<void> {
    if (!this.writing && this.scheduled === undefined && this.queue.length === 0 && !this.unwritten) return Promise.resolve();
    return new Promise((resolve) => {
      this.flushedWaiters.push(resolve);
      if (this.scheduled !== undefined) this.soon();
      else if (!this.writing && !this.retryTimer) this.flush();
    });
  }

  /** Build the queued events into lines (seq, time, prev) and append them in one write. */
  private build(): { text: string; seq: number; hash: string; records: number } | undefined {
    if (this.dropped > 0) {
      const n = this.dropped;
      this.dropped = 0;
      this.lostRecords += n;
      // They came after what is queued: said after it.
      this.queue.push({ at: Date.now(), body: { type: 'audit', event: 'lost', records: n, why: 'the queue of records to write was full' } });
    }
    if (this.queue.length === 0) return undefined;
    const queue = this.queue;
    this.queue = [];
    let text = '';
    for (const { at, body } of queue) {
      const line = lineOf(++this.seq, new Date(at).toISOString(), this.head, body as unknown as Record<string, unknown>);
      this.head = hashOf(line);
      text += `${line}\n`;
    }
    return { text, seq: this.seq, hash: this.head, records: queue.length };
  }

  private flush(): void {
    if (this.scheduled !== 'now') clearTimeout(this.scheduled);
    this.scheduled = undefined;
    if (this.writing || this.closed) return;
    const batch = this.unwritten ?? this.build();
    this.unwritten = undefined;
    if (!batch) return this.settle();
    if (this.fd === undefined) return this.refused(batch, new Error('the trail has no open file'));
    this.writing = true;
    const buf = Buffer.from(batch.text);
    const fd = this.fd;
    const put = (off: number): void =>
      write(fd, buf, off, buf.length - off, null, (err, n) => {
        if (!err && off + n < buf.length) return put(off + n);
        this.writing = false;
        if (err) return this.refused(batch, err);
        this.wrote(batch, buf.length);
      });
    put(0);
  }

  private wrote(batch: { seq: number; hash: string }, bytes: number): void {
    this.written = { seq: batch.seq, hash: batch.hash };
    const current = this.files.at(-1);
    if (current) current.bytes += bytes;
    if (this.closed) {
      // Closed while this write was under way: the descriptor is this one's to close.
      if (this.fd !== undefined) closeSync(this.fd);
      this.fd = undefined;
      return this.settle();
    }
    if (this.fault !== undefined) {
      this.log.info({ dir: this.dir }, 'the audit trail takes writes again');
      this.fault = undefined;
    }
    if (current && current.bytes >= fileBytesFor(this.limits.maxBytes)) {
      try {
        this.startFile(current.n + 1);
      } catch (err) {
        this.failed(err as Error);
      }
      this.enforceBounds();
    }
    if (this.queue.length > 0 || this.dropped > 0) return this.flush();
    this.settle();
  }

  /** The disk refused a batch: kept and tried again, unless too much waits, then given up on and said in the trail. */
  private refused(batch: { text: string; seq: number; hash: string; records: number }, err: Error): void {
    this.failedWrites++;
    if (this.closed) {
      this.lostRecords += batch.records;
      this.log.error({ records: batch.records, err: err.message }, 'the audit trail could not take its last records at shutdown');
      if (this.fd !== undefined) closeSync(this.fd);
      this.fd = undefined;
      return this.settle();
    }
    this.failed(err);
    if (batch.text.length > MAX_UNWRITTEN_BYTES) {
      this.lostRecords += batch.records;
      // The chain goes on from the last line that reached the file, and says what it lost.
      this.head = this.written.hash;
      this.seq = this.written.seq;
      this.queue.unshift({ at: Date.now(), body: { type: 'audit', event: 'lost', records: batch.records, why: `the disk refused them: ${err.message}` } });
    } else {
      this.unwritten = batch;
    }
    this.retryTimer ??= setTimeout(() => {
      this.retryTimer = undefined;
      this.flush();
    }, RETRY_MS);
    this.retryTimer.unref();
    this.settle();
  }

  private settle(): void {
    if (this.writing || this.queue.length > 0) return;
    const waiters = this.flushedWaiters;
    this.flushedWaiters = [];
    for (const w of waiters) w();
  }

  private failed(err: Error): void {
    if (this.fault === undefined) this.log.error({ dir: this.dir, err: err.message }, 'the audit trail cannot be written; records are kept in memory and retried, and counted when given up');
    this.fault = err.message;
  }

  private startFile(n: number): void {
    if (this.fd !== undefined) closeSync(this.fd);
    this.fd = undefined;
    const path = join(this.dir, fileName(n));
    this.fd = openSync(path, 'a', 0o600);
    this.files.push({ n, name: fileName(n), path, bytes: statSync(path).size });
  }

  /**
   * Where the chain goes on: the hash and seq of the last whole line. A last line without its
   * newline is a record torn by a crash: it is ended with a newline (kept, for whoever looks) and
   * the first record of this run says so, naming it, and names the last whole line as its prev.
   */
  private recoverHead(): void {
    let newest = true;
    for (let i = this.files.length - 1; i >= 0; i--) {
      const f = this.files[i];
      if (f.bytes === 0) continue;
      const { text } = readTail(f.path, Math.min(f.bytes, 4 * 1024 * 1024));
      const lines = text.split('\n');
      const fragment = lines.pop()!;
      if (newest && fragment !== '') {
        const line = countLines(f.path);
        appendFileSync(f.path, '\n');
        f.bytes += 1;
        this.queue.push({ at: Date.now(), body: { type: 'audit', event: 'torn', file: f.name, line, bytes: Buffer.byteLength(fragment) } });
        this.soon();
        this.log.warn({ file: f.name, line }, 'the audit trail ended in a torn record (the daemon stopped while writing it); the trail goes on from the last whole record');
      }
      newest = false;
      if (lines.length === 0) continue;
      const last = lines.length - 1;
      this.head = hashOf(lines[last]);
      const r = parseRecord(lines[last]);
      this.seq = r ? r.seq : this.seqBefore(lines, last);
      this.written = { seq: this.seq, hash: this.head };
      return;
    }
  }

  /** The seq of a last line that is not a record (changed by hand): one past the last one that is. */
  private seqBefore(lines: string[], last: number): number {
    for (let i = last - 1; i >= 0; i--) {
      const r = parseRecord(lines[i]);
      if (r) return r.seq + (last - i);
    }
    return last + 1;
  }

  /** Whole files go, oldest first, while the trail is over `maxBytes` or older than `days`; each removal is recorded. */
  private enforceBounds(now = Date.now()): void {
    if (!this.limits.enabled) return;
    const cutoff = now - this.limits.days * DAY_MS;
    while (this.files.length > 1) {
      const total = this.files.reduce((n, f) => n + f.bytes, 0);
      const oldest = this.files[0];
      let lastLine = '';
      try {
        lastLine = readTail(oldest.path, 64 * 1024).text.replace(/\n$/, '').split('\n').pop() ?? '';
      } catch {
        // gone already: removed below all the same
      }
      const last = parseRecord(lastLine);
      const why = total > this.limits.maxBytes ? 'maxBytes' : last && Date.parse(last.time) < cutoff ? 'days' : undefined;
      if (!why) return;
      try {
        unlinkSync(oldest.path);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
          this.failed(err as Error);
          return;
        }
      }
      this.files.shift();
      this.add({ type: 'audit', event: 'removed', file: oldest.name, why, bytes: oldest.bytes, lastSeq: last?.seq ?? -1, lastHash: hashOf(lastLine) });
    }
  }

  /**
   * The daemon's shutdown: let a write under way finish (a little while at most: a disk that
   * refuses is not waited for), then write what is queued and close.
   */
  async shutdown(waitMs = 2000): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.flushed(), new Promise<void>((r) => (timer = setTimeout(r, waitMs)))]);
    clearTimeout(timer);
    this.close();
  }

  /** Write what is queued, now, and close. */
  close(): void {
    if (this.closed) return;
    clearInterval(this.ageTimer);
    clearTimeout(this.retryTimer);
    if (this.scheduled !== 'now') clearTimeout(this.scheduled);
    this.scheduled = undefined;
    this.unlisten?.();
    if (this.fd !== undefined && !this.writing) {
      const batch = this.unwritten ?? this.build();
      this.unwritten = undefined;
      if (batch) {
        try {
          writeSync(this.fd, batch.text);
          this.written = { seq: batch.seq, hash: batch.hash };
        } catch (err) {
          this.lostRecords += batch.records;
          this.log.error({ err: (err as Error).message, records: batch.records }, 'the audit trail could not take its last records at shutdown');
        }
      }
    }
    if (this.writing) {
      const left = this.queue.length + this.dropped;
      if (left > 0) {
        this.lostRecords += left;
        this.log.error({ records: left }, 'the audit trail was still writing at shutdown; the records queued behind it are lost');
      }
    }
    this.closed = true;
    if (this.fd !== undefined && !this.writing) {
      closeSync(this.fd);
      this.fd = undefined;
    }
  }
}

function countLines(path: string): number {
  // A file of the trail is at most 32 MiB: counted at start only, and only after a crash.
  const { text } = readTail(path, 64 * 1024 * 1024);
  let n = 1;
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) n++;
  return n;
}
