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

  /**
   * Feed a chunk: its complete lines are pushed onto `into` (a carriage return before a newline
   * dropped); returns whether a frame passed the limit after them. Nothing is made per chunk but
   * the lines' strings: a poll's line is decoded from the chunk where it lies.
   */
  push(chunk: Buffer, into: string[]): boolean {
    let start = 0;
    for (let nl = chunk.indexOf(10, start); nl !== -1; nl = chunk.indexOf(10, start)) {
      if (this.size + nl - start > this.maxBytes) return true;
      const end = nl > start && chunk[nl - 1] === 13 ? nl - 1 : nl;
      if (this.parts.length === 0) into.push(chunk.toString('utf8', start, end));
      else {
        const line = Buffer.concat([...this.parts, chunk.subarray(start, nl)]).toString('utf8');
        into.push(line.endsWith('\r') ? line.slice(0, -1) : line);
        this.parts = [];
        this.size = 0;
      }
      start = nl + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.size += rest.length;
      if (this.size > this.maxBytes) return true;
      this.parts.push(Buffer.from(rest));
    }
    return false;
  }
}
