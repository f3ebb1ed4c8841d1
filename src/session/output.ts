import { isAscii } from 'node:buffer';
import { StringDecoder } from 'node:string_decoder';
import { ChunkQueue, pieceText, type Piece } from './chunks.js';
import { sessionEdited } from './edits.js';

export type Stream = 'stdout' | 'stderr';

/** How many runs of stderr output a session keeps the place of, at least (SessionOutput.stderrIn; up to twice as many). */
const STDERR_RANGES = 20_000;

/** Where a session's output is copied as it comes (its spool on disk). */
export interface OutputSink {
  write(data: Buffer | string): void;
}

export interface Drained {
  /** Newly drained output of both streams, interleaved in arrival order. */
  readonly text: string;
  /** Characters each stream's pending cap dropped before this drain. */
  readonly dropped: { readonly stdout: number; readonly stderr: number };
}

/** A drain that found nothing (a quiet session polled): one answer for all, made nothing anew. */
const NOTHING: Drained = Object.freeze({ text: '', dropped: Object.freeze({ stdout: 0, stderr: 0 }) });

/**
 * A session's captured output: the retained combined transcript (newest `maxOutputChars` kept)
 * and, per stream, the output no poll has returned yet (newest `pendingMaxOutputChars` kept).
 * Bytes are decoded as UTF-8 per stream, so a character split across reads is kept whole.
 */
export class SessionOutput {
  private readonly decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  /** The stream's last chunk may have ended inside a character: its decoder may hold part of it. */
  private readonly split = { stdout: false, stderr: false };
  /** The bytes of an incomplete character the stream's decoder holds (a restart hands them on, SPEC §19). */
  private readonly held: { stdout: Buffer | undefined; stderr: Buffer | undefined } = { stdout: undefined, stderr: undefined };
  private readonly retained: ChunkQueue;
  private readonly pending: { stdout: ChunkQueue; stderr: ChunkQueue };
  private seq = 0;
  /** Where stderr's output lies in the whole output: [start, end) character offsets, flat pairs, oldest first. */
  private readonly errRanges: number[] = [];
  /** Characters ever captured, both streams. */
  totalChars = 0;
  lastOutputAt: number | undefined;

  constructor(maxOutputChars: number, pendingMaxOutputChars: number) {
    this.retained = new ChunkQueue(maxOutputChars);
    this.pending = { stdout: new ChunkQueue(pendingMaxOutputChars), stderr: new ChunkQueue(pendingMaxOutputChars) };
  }

  /**
   * Decode and store a chunk; returns the text it added ('' while a character is incomplete).
   * The sink gets the same output: the bytes as they came (no copy) when they hold whole
   * characters, else the text. The sink holds both streams in arrival order, so a read that
   * starts or ends inside a character must not go there as bytes: the other stream's output
   * could land between its halves. No sink: the reader put the chunk's whole characters there
   * itself (spliced); the first bytes of one it ends inside are held here, written with their rest.
   */
  write(stream: Stream, bytes: Buffer | string, sink?: OutputSink): string {
    return pieceText(this.capture(stream, bytes, sink));
  }

  /**
   * `write` for the capture path: what the chunk added, undecoded when it is all ASCII and no
   * character was left incomplete before it (the bytes are then its characters, one each). Most
   * of a fast stream is dropped by the caps before anyone reads it: it is never decoded.
   */
  capture(stream: Stream, bytes: Buffer | string, sink?: OutputSink): Piece {
    if (typeof bytes === 'string') {
      this.add(stream, bytes);
      sink?.write(bytes);
      return bytes;
    }
    if (!this.split[stream] && isAscii(bytes)) {
      this.add(stream, bytes);
      sink?.write(bytes);
      return bytes;
    }
    const text = this.decoders[stream].write(bytes);
    this.add(stream, text);
    // Whole when nothing was carried in from the last read and nothing is held for the next:
    // then its bytes decode alone exactly as they did here (invalid ones to the same U+FFFD).
    const endsInside = mayEndInside(bytes);
    const whole = !this.split[stream] && !endsInside;
    // Rare (a read that ends inside a character): what the decoder now holds, kept for a restart.
    this.held[stream] = endsInside ? incompleteTail(this.split[stream] && this.held[stream] ? Buffer.concat([this.held[stream]!, bytes]) : bytes) : undefined;
    this.split[stream] = endsInside;
    if (sink) {
      if (whole) sink.write(bytes);
      else if (text) sink.write(text);
    }
    return text;
  }

  /** Flush a stream's decoder at end of input (an incomplete character becomes U+FFFD). */
  end(stream: Stream, sink?: OutputSink): string {
    const text = this.decoders[stream].end();
    this.add(stream, text);
    if (text) sink?.write(text);
    this.split[stream] = false;
    this.held[stream] = undefined;
    return text;
  }

  /**
   * The stream's decoder holds the first bytes of a character whose rest has not come: they are in
   * no sink yet (a reader that splices leaves them out of the spool's count), and the capture writes
   * them, whole with their rest or as U+FFFD at `end`. A splicing reader reads meanwhile (runner/launch/splice.ts).
   */
  unfinished(stream: Stream): boolean {
    return this.held[stream] !== undefined;
  }

  /** The bytes of a character each stream's decoder holds, half read (a restart hands them on). */
  heldBytes(): { stdout: Buffer | undefined; stderr: Buffer | undefined } {
    return { ...this.held };
  }

  /** Give a stream's decoder back the half-read character the last image held. */
  restoreHeld(stream: Stream, bytes: Buffer): void {
    if (bytes.length === 0) return;
    this.decoders[stream].write(bytes);
    this.split[stream] = true;
    this.held[stream] = bytes;
  }

  private add(stream: Stream, text: Piece): void {
    if (text.length === 0) return;
    const seq = this.seq++;
    this.retained.push(text);
    this.pending[stream].push(text, seq);
    if (stream === 'stderr') this.noteStderr(this.totalChars, this.totalChars + text.length);
    this.totalChars += text.length;
    sessionEdited();
    this.lastOutputAt = Date.now();
  }

  private noteStderr(start: number, end: number): void {
    const r = this.errRanges;
    if (r.length > 0 && r[r.length - 1] === start) r[r.length - 1] = end;
    else r.push(start, end);
    // Kept for the newest output only: a job that interleaves its streams endlessly costs a bounded
    // list. Trimmed by half when it doubles, so a chunk of output does not shift the whole list.
    if (r.length > 4 * STDERR_RANGES) r.splice(0, r.length - 2 * STDERR_RANGES);
  }

  /**
   * Where stderr lies in the whole output's characters [from, to), as [start, end) offsets from
   * `from` (for a page of the log to mark it). Not known for output from before a restart, nor
   * older than the newest STDERR_RANGES runs of it.
   */
  stderrIn(from: number, to: number): [number, number][] {
    const r = this.errRanges;
    const out: [number, number][] = [];
    let i = r.length - 2;
    while (i >= 0 && r[i + 1] > from) i -= 2;
    for (i += 2; i < r.length && r[i] < to; i += 2) out.push([Math.max(r[i], from) - from, Math.min(r[i + 1], to) - from]);
    return out;
  }

  /** Characters dropped from the retained transcript. */
  get droppedChars(): number {
    return this.retained.dropped;
  }

  /** The retained transcript's cap (maxOutputChars). */
  get capChars(): number {
    return this.retained.cap;
  }

  get retainedChars(): number {
    return this.retained.length;
  }

  get hasPending(): boolean {
    return !this.pending.stdout.empty || !this.pending.stderr.empty || this.pendingDropped > 0;
  }

  private get pendingDropped(): number {
    return this.pending.stdout.dropped + this.pending.stderr.dropped;
  }

  text(): string {
    return this.retained.text();
  }

  tail(n: number): string {
    return this.retained.tail(n);
  }

  /** Take what no poll has returned yet, both streams merged back into arrival order. */
  drain(): Drained {
    if (!this.hasPending) return NOTHING;
    const out = this.pending.stdout.drain();
    const err = this.pending.stderr.drain();
    return { text: merge(out.chunks, err.chunks), dropped: { stdout: out.dropped, stderr: err.dropped } };
  }

  /** What no poll has returned yet, without taking it (for the durable record). */
  peekPending(): string {
    return merge([...this.pending.stdout.entries()], [...this.pending.stderr.entries()]);
  }

  /** Put back what a durable record kept (after a restart). */
  restore(saved: { retained: string; dropped: number; total: number; pending: string }): void {
    this.retained.push(saved.retained);
    this.retained.dropped += saved.dropped;
    this.totalChars = saved.total;
    sessionEdited();
    if (saved.pending) this.pending.stdout.push(saved.pending, this.seq++);
  }
}

/**
 * True when a chunk may end inside a character, so its decoder may hold bytes for the next
 * chunk: a lead byte among the last four whose sequence does not fit, or no lead byte at all.
 */
function mayEndInside(bytes: Buffer): boolean {
  for (let i = bytes.length - 1, back = 1; i >= 0 && back <= 4; i--, back++) {
    const b = bytes[i];
    if (b < 0x80) return false;
    if (b >= 0xc0) return (b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2) > back;
  }
  return bytes.length > 0;
}

/** The bytes after the last lead byte when its character is not complete (what a UTF-8 decoder holds), else undefined. */
function incompleteTail(bytes: Buffer): Buffer | undefined {
  const n = incompleteTailLength(bytes);
  return n > 0 ? Buffer.from(bytes.subarray(bytes.length - n)) : undefined;
}

/**
 * How many bytes at the end of `bytes` begin a character whose rest has not come (0-3), as a
 * UTF-8 decoder holds them: a lead byte (0xc0-0xf7) with fewer continuation bytes than it needs.
 */
export function incompleteTailLength(bytes: Buffer): number {
  for (let i = bytes.length - 1, back = 1; i >= 0 && back <= 4; i--, back++) {
    const b = bytes[i]!;
    if (b < 0x80 || b >= 0xf8) return 0;
    if (b >= 0xc0) return (b >= 0xf0 ? 4 : b >= 0xe0 ? 3 : 2) > back ? back : 0;
  }
  return 0;
}

/**
 * How many of a read's first bytes a reader may put in the spool as they came (spliced) and hand
 * on as spooled: all but the first bytes of a character the read ends inside (the capture's
 * decoder holds them and writes them with their rest). None when the bytes before those would not
 * decode alone (an invalid lead that only the unfinished character's lead ends): a decoder reading
 * on from them in the spool would join them to whatever comes next, so the capture writes the read.
 */
export function spliceableLength(bytes: Buffer): number {
  const cut = incompleteTailLength(bytes);
  if (cut === 0) return bytes.length;
  return incompleteTailLength(bytes.subarray(0, bytes.length - cut)) > 0 ? 0 : bytes.length - cut;
}

function merge(a: [string, number][], b: [string, number][]): string {
    const parts: string[] = [];
    let i = 0;
    let j = 0;
    while (i < a.length || j < b.length) {
      if (j >= b.length || (i < a.length && a[i][1] < b[j][1])) parts.push(a[i++][0]);
      else parts.push(b[j++][0]);
    }
    return parts.join('');
}

