/**
 * A chunk of text: a string, or bytes that are all ASCII (one character each), kept as they came
 * and decoded only when read. A fast stream's chunks are mostly dropped by the cap before anyone
 * reads them: those are never turned into strings.
 */
export type Piece = string | Buffer;

/** The text of a piece (ASCII bytes read as latin1: the same characters, no validation). */
export const pieceText = (p: Piece): string => (typeof p === 'string' ? p : p.toString('latin1'));

/** A piece of bytes this small is copied on its own (Node's shared pool) while the queue has no ring yet. */
const SMALL_PIECE = 1024;
/** The first ring a queue makes, at least. */
const FIRST_RING = 16 * 1024;

/**
 * A queue of text chunks that keeps at most `cap` characters, dropping the oldest first and
 * counting what it dropped. Appending is O(1) amortised and never copies retained text, so the
 * capture path stays cheap however much a command prints.
 *
 * Bytes pushed are the daemon's read buffer, reused by the next read (runner/launch/pipes.ts):
 * the queue copies what its cap keeps of them, and only that, into a ring of its own (at most
 * `cap` bytes, grown by doubling), so a fast stream allocates no buffer per read. The ring is
 * never written over bytes a piece still holds: the pieces' bytes are the newest the ring took,
 * at most `length` of them, and room for a piece is made by the cap before it is copied.
 */
export class ChunkQueue {
  private items: Piece[] = [];
  private seqs: number[] = [];
  private start = 0;
  private ring: Buffer | undefined;
  /** Where the next bytes go in the ring. */
  private at = 0;
  /** Characters currently held. */
  length = 0;
  /** Characters dropped from the front since creation (or the last drain). */
  dropped = 0;

  constructor(readonly cap: number) {}

  push(text: Piece, seq = 0): void {
    if (text.length === 0) return;
    if (typeof text !== 'string') return this.pushBytes(text, seq);
    this.items.push(text);
    this.seqs.push(seq);
    this.length += text.length;
    if (this.length > this.cap) this.trimFront(this.length - this.cap);
  }

  /** ASCII bytes (one character each), copied: only what the cap keeps of them. */
  private pushBytes(bytes: Buffer, seq: number): void {
    if (bytes.length > this.cap) {
      this.dropped += bytes.length - this.cap;
      bytes = bytes.subarray(bytes.length - this.cap);
      if (bytes.length === 0) return this.trimFront(this.length);
    }
    if (this.length + bytes.length > this.cap) this.trimFront(this.length + bytes.length - this.cap);
    const n = bytes.length;
    if (!this.ring && n <= SMALL_PIECE) {
      this.append(Buffer.from(bytes), seq);
      return;
    }
    // Live ring bytes are at most `length`: a ring that holds them and this piece is never written over a held byte.
    if (!this.ring || this.length + n > this.ring.length) {
      let size = Math.max(FIRST_RING, this.ring ? this.ring.length * 2 : 0);
      while (size < (this.length + n) * 2 && size < this.cap) size *= 2;
      this.ring = Buffer.allocUnsafeSlow(Math.min(size, this.cap));
      this.at = 0;
    }
    const ring = this.ring;
    const first = Math.min(n, ring.length - this.at);
    bytes.copy(ring, this.at, 0, first);
    this.append(ring.subarray(this.at, this.at + first), seq);
    this.at += first;
    if (first < n) {
      // Wrapped: the rest from the ring's start, a piece of its own with the same place in order.
      bytes.copy(ring, 0, first);
      this.append(ring.subarray(0, n - first), seq);
      this.at = n - first;
    }
    if (this.at === ring.length) this.at = 0;
  }

  private append(piece: Piece, seq: number): void {
    this.items.push(piece);
    this.seqs.push(seq);
    this.length += piece.length;
  }

  get empty(): boolean {
    return this.length === 0;
  }

  /** Every chunk held, oldest first, with the sequence number it was pushed with. */
  *entries(): Generator<[string, number]> {
    for (let i = this.start; i < this.items.length; i++) yield [pieceText(this.items[i]), this.seqs[i]];
  }

  text(): string {
    if (this.start > 0) this.compact(true);
    const joined = this.items.length === 1 ? pieceText(this.items[0]) : this.items.map(pieceText).join('');
    // Keep one flat chunk so repeated reads do not join again.
    if (this.items.length > 1 || (this.items.length === 1 && typeof this.items[0] !== 'string')) {
      this.items = [joined];
      this.seqs = [this.seqs[this.seqs.length - 1]];
    }
    return joined;
  }

  /** The last `n` characters, without joining everything. */
  tail(n: number): string {
    const parts: string[] = [];
    let need = n;
    for (let i = this.items.length - 1; i >= this.start && need > 0; i--) {
      const item = this.items[i];
      parts.push(item.length <= need ? pieceText(item) : typeof item === 'string' ? safeSliceFrom(item, item.length - need) : item.toString('latin1', item.length - need));
      need -= item.length;
    }
    return parts.reverse().join('');
  }

  /** Remove and return everything held; resets the dropped count. */
  drain(): { chunks: [string, number][]; dropped: number } {
    // Nothing held (a quiet session polled): its arrays stay. New ones, kept by a session that
    // lives long, outlived the young generation at every poll and waited for a full collection.
    if (this.items.length === 0 && this.dropped === 0) return { chunks: [], dropped: 0 };
    const chunks = [...this.entries()];
    const dropped = this.dropped;
    this.items = [];
    this.seqs = [];
    this.start = 0;
    this.length = 0;
    this.dropped = 0;
    this.at = 0;
    return { chunks, dropped };
  }

  private trimFront(excess: number): void {
    while (excess > 0 && this.start < this.items.length) {
      const first = this.items[this.start];
      if (first.length <= excess) {
        excess -= first.length;
        this.length -= first.length;
        this.dropped += first.length;
        this.items[this.start] = '';
        this.start++;
      } else {
        const kept = typeof first === 'string' ? safeSliceFrom(first, excess) : first.subarray(excess);
        const cut = first.length - kept.length;
        this.items[this.start] = kept;
        this.length -= cut;
        this.dropped += cut;
        excess = 0;
      }
    }
    if (this.start > 64 && this.start * 2 > this.items.length) this.compact(false);
  }

  private compact(force: boolean): void {
    if (!force && this.start === 0) return;
    this.items = this.items.slice(this.start);
    this.seqs = this.seqs.slice(this.start);
    this.start = 0;
  }
}

/** `s.slice(from)`, moved one further if it would start on the second half of a surrogate pair. */
export function safeSliceFrom(s: string, from: number): string {
  const code = s.charCodeAt(from);
  if (from > 0 && code >= 0xdc00 && code <= 0xdfff) return s.slice(from + 1);
  return s.slice(from);
}

/**
 * At most `cap` characters of a text: its newest (`fromEnd`) or its first, never half of a
 * surrogate pair.
 */
export function capText(text: string, cap: number, fromEnd: boolean): string {
  if (text.length <= cap) return text;
  if (cap <= 0) return '';
  if (fromEnd) return safeSliceFrom(text, text.length - cap);
  const code = text.charCodeAt(cap - 1);
  return text.slice(0, code >= 0xd800 && code <= 0xdbff ? cap - 1 : cap);
}
