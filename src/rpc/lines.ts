/**
 * Splits a byte stream into NDJSON lines, refusing any line longer than `maxBytes`. Bytes are
 * kept as Buffers until a whole line is there, so a character split across reads is not broken.
 */
export class LineSplitter {
  private parts: Buffer[] = [];
  private size = 0;

  constructor(private readonly maxBytes: number) {}

  /** Bytes of a line not yet complete. */
  get partialBytes(): number {
    return this.size;
  }

  /** Let go of the incomplete line held; returns how many bytes it had. */
  discard(): number {
    const had = this.size;
    this.parts = [];
    this.size = 0;
    return had;
  }

  /** Feed a chunk; returns the complete lines, and whether a frame passed the limit after them. */
  push(chunk: Buffer): { lines: string[]; oversized: boolean } {
    const lines: string[] = [];
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      const piece = chunk.subarray(start, nl);
      if (this.size + piece.length > this.maxBytes) return { lines, oversized: true };
      const line = this.parts.length ? Buffer.concat([...this.parts, piece]) : piece;
      this.parts = [];
      this.size = 0;
      lines.push(line.toString('utf8').replace(/\r$/, ''));
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.size += rest.length;
      if (this.size > this.maxBytes) return { lines, oversized: true };
      this.parts.push(Buffer.from(rest));
    }
    return { lines, oversized: false };
  }
}
