import { connectTo, NdjsonConnection } from '../helpers/ndjson.js';

/**
 * A raw connection for bulk traffic: writes bytes without waiting for answers and keeps every
 * line the daemon sends back. A line that is not JSON is kept apart (the daemon must never send one).
 */
export class Wire extends NdjsonConnection {
  readonly answers: unknown[] = [];
  readonly notJson: string[] = [];

  static async connect(path: string): Promise<Wire> {
    return new Wire(await connectTo(path));
  }

  protected override onLine(line: string): void {
    try {
      this.answers.push(JSON.parse(line));
    } catch {
      this.notJson.push(line);
    }
  }

  /** Write all of `data` in pieces of the given sizes (so frames straddle reads); never waits for answers. */
  writeInPieces(data: Buffer, sizes: () => number): void {
    for (let at = 0; at < data.length && !this.closed; ) {
      const n = Math.max(1, sizes());
      this.socket.write(data.subarray(at, at + n));
      at += n;
    }
  }

  /** Resolves true once `cond()` holds (checked on every answer and on close), false at the deadline. */
  until(cond: () => boolean, timeoutMs: number): Promise<boolean> {
    return this.holds(cond, timeoutMs);
  }
}
