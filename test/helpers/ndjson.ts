import { connect, type Socket } from 'node:net';

/** A connection to a Unix socket, once it is connected. */
export function connectTo(path: string): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const s = connect(path);
    s.once('connect', () => resolve(s));
    s.once('error', reject);
  });
}

/**
 * A raw connection to the daemon read as newline-delimited JSON, as the tests' own clients
 * (test/helpers/rpc.ts, test/stress/wire.ts) read it, independent of src/: each line that is not
 * blank goes to onLine, and whatever waits in holds() looks again after every read and at the close.
 */
export abstract class NdjsonConnection {
  closed = false;
  private buf = '';
  private readonly listeners = new Set<() => void>();

  protected constructor(readonly socket: Socket) {
    socket.setEncoding('utf8');
    socket.on('data', (d: string) => this.onData(d));
    socket.on('close', () => {
      this.closed = true;
      this.wake();
    });
    // EPIPE or ECONNRESET after the daemon closed the connection (an over-size one): 'close' follows.
    socket.on('error', () => undefined);
  }

  /** A line the daemon sent, without its newline. */
  protected abstract onLine(line: string): void;

  private onData(d: string): void {
    this.buf += d;
    let start = 0;
    try {
      for (let nl = this.buf.indexOf('\n', start); nl !== -1; nl = this.buf.indexOf('\n', start)) {
        const line = this.buf.slice(start, nl);
        start = nl + 1;
        // The daemon writes a blank line to tell a half-closed client from a vanished one.
        if (line.trim() !== '') this.onLine(line);
      }
    } finally {
      // A line onLine threw on is taken all the same; the lines after it wait for the next read.
      this.buf = this.buf.slice(start);
    }
    this.wake();
  }

  private wake(): void {
    for (const l of [...this.listeners]) l();
  }

  /** Resolves true once `cond()` holds (looked at after every read and at the close), false at the deadline. */
  protected holds(cond: () => boolean, timeoutMs: number): Promise<boolean> {
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
