import { connect, type Socket } from 'node:net';
import { now } from './stats.js';

export interface Timed<T = any> {
  result: T;
  /** ms from writing the request to the last byte of the response line arriving. */
  receivedMs: number;
  /** ms from writing the request to the response being parsed. */
  parsedMs: number;
  /** The request's id, and when it was written (performance.now()): a daemon's trace names it so (bench/lib/trace.ts). */
  id: number;
  sentAt: number;
}

interface Waiter {
  id: number;
  sentAt: number;
  resolve: (t: Timed) => void;
  reject: (e: Error) => void;
  method: string;
}

/**
 * A lean NDJSON JSON-RPC client for the bench: one persistent connection, responses matched by id,
 * notifications handed to a listener. It notes when each response line is complete (before JSON
 * parsing) so transport and parse time can be told apart.
 */
export class BenchClient {
  private parts: Buffer[] = [];
  private nextId = 1;
  private readonly waiting = new Map<number, Waiter>();
  onNotification: (msg: any) => void = () => undefined;

  private constructor(private readonly socket: Socket) {
    socket.setNoDelay?.(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('close', () => {
      for (const w of this.waiting.values()) w.reject(new Error(`connection closed during ${w.method}`));
      this.waiting.clear();
    });
    socket.on('error', () => undefined);
  }

  static connect(path: string): Promise<BenchClient> {
    return new Promise((resolve, reject) => {
      const s = connect(path);
      s.once('connect', () => resolve(new BenchClient(s)));
      s.once('error', reject);
    });
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const receivedAt = now();
      const piece = chunk.subarray(start, nl);
      const line = this.parts.length ? Buffer.concat([...this.parts, piece]) : piece;
      this.parts = [];
      start = nl + 1;
      this.onLine(line.toString('utf8'), receivedAt);
    }
    if (start < chunk.length) this.parts.push(chunk.subarray(start));
  }

  private onLine(line: string, receivedAt: number): void {
    if (!line.trim()) return;
    const msg = JSON.parse(line);
    const parsedAt = now();
    if (msg.id === undefined || msg.id === null) {
      if (msg.method) this.onNotification(msg);
      return;
    }
    const w = this.waiting.get(msg.id);
    if (!w) return;
    this.waiting.delete(msg.id);
    if (msg.error) {
      const err = Object.assign(new Error(`${w.method}: ${msg.error.message}`), { rpc: msg.error });
      w.reject(err);
    } else w.resolve({ result: msg.result, receivedMs: receivedAt - w.sentAt, parsedMs: parsedAt - w.sentAt, id: w.id, sentAt: w.sentAt });
  }

  /** Call a method and time the round trip. */
  timed<T = any>(method: string, params?: unknown): Promise<Timed<T>> {
    const id = this.nextId++;
    const line = `${JSON.stringify({ jsonrpc: '2.0', id, method, params })}\n`;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { id, sentAt: now(), resolve, reject, method });
      this.socket.write(line);
    });
  }

  async call<T = any>(method: string, params?: unknown): Promise<T> {
    return (await this.timed<T>(method, params)).result;
  }

  close(): void {
    this.socket.destroy();
  }
}

/** A foreground `exec` of `true` through `client`: its round trip in ms (throws on any other answer). */
export async function execTrue(client: BenchClient): Promise<number> {
  const t0 = now();
  const result = await client.call('exec', { command: 'true' });
  const ms = now() - t0;
  if (result.status !== 'completed' || result.exitCode !== 0) throw new Error(`exec true answered ${JSON.stringify(result).slice(0, 300)}`);
  return ms;
}

/** Between rounds, untimed: forget the finished sessions so every round starts alike. */
export async function clearFinished(client: BenchClient): Promise<void> {
  const { sessions } = await client.call('process', { action: 'list' });
  for (const s of sessions) if (s.status !== 'running') await client.call('process', { action: 'clear', sessionId: s.sessionId });
}
