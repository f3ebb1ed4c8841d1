import { connect, type Socket } from 'node:net';

/**
 * A raw connection for bulk traffic: writes bytes without waiting for answers and keeps every
 * line the daemon sends back. A line that is not JSON is kept apart (the daemon must never send one).
 */
export class Wire {
  readonly answers: unknown[] = [];
  readonly notJson: string[] = [];
  closed = false;
  private buf = '';
  private readonly listeners = new Set<() => void>();

  private constructor(readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => this.onData(d));
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    // EPIPE or ECONNRESET after the daemon closed an over-size connection: 'close' follows.
    socket.on('error', () => undefined);
  }

  static connect(path: string): Promise<Wire> {
    return new Promise((resolve, reject) => {
      const s = connect(path);
      s.once('connect', () => resolve(new Wire(s)));
      s.once('error', reject);
    });
  }

  private onData(d: string): void {
    this.buf += d;
    let start = 0;
    for (let nl = this.buf.indexOf('\n', start); nl !== -1; nl = this.buf.indexOf('\n', start)) {
      const line = this.buf.slice(start, nl);
      start = nl + 1;
      // The daemon writes a blank line to tell a half-closed client from a vanished one.
      if (line.trim() === '') continue;
      try {
        this.answers.push(JSON.parse(line));
      } catch {
        this.notJson.push(line);
      }
    }
    this.buf = this.buf.slice(start);
    this.wake();
  }

  private wake(): void {
    for (const l of [...this.listeners]) l();
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
    if (cond()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const check = () => {
        if (!cond()) return;
        clearTimeout(timer);
        this.listeners.delete(check);
        resolve(true);
      };
      const timer = setTimeout(() => {
        this.listeners.delete(check);
        resolve(false);
      }, timeoutMs);
      this.listeners.add(check);
    });
  }

  close(): void {
    this.socket.destroy();
  }
}
