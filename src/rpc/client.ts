import { JSONRPCClient, JSONRPCErrorException, type JSONRPCResponse } from 'json-rpc-2.0';
import type { ErrorKind } from '../base/errors.js';
import type { Dial, Transport } from '../transport/dial.js';
import { DaemonUnreachableError } from '../transport/unreachable.js';

export { DaemonUnreachableError } from '../transport/unreachable.js';

/** The daemon answered a call with a JSON-RPC error. */
export class RpcCallError extends Error {
  constructor(
    message: string,
    readonly code: number,
    readonly data: Record<string, unknown> | undefined,
  ) {
    super(message);
    this.name = 'RpcCallError';
  }

  /** The application error kind (`not_found`, `invalid`, …), when the daemon gave one. */
  get kind(): ErrorKind | undefined {
    return this.data?.kind as ErrorKind | undefined;
  }
}

export interface Notification {
  method: string;
  params: Record<string, unknown>;
}

/**
 * A client of procctld: NDJSON framing, request ids and error exceptions from json-rpc-2.0,
 * notifications handed to a callback. The bytes go over a Transport (socket or ssh).
 */
export class DaemonClient {
  private readonly rpc: JSONRPCClient;
  /** Bytes of a line not yet complete; kept as Buffers so a character split across reads stays whole. */
  private partial: Buffer[] = [];
  private lost: DaemonUnreachableError | undefined;
  private transport: Transport | undefined;
  private resolveClosed!: (reason: DaemonUnreachableError) => void;
  /** Resolves with the reason once the connection has closed, for whatever cause. */
  readonly closed = new Promise<DaemonUnreachableError>((resolve) => (this.resolveClosed = resolve));

  private constructor(private readonly onNotification: ((n: Notification) => void) | undefined) {
    this.rpc = new JSONRPCClient((req) => {
      if (this.lost) throw this.lost;
      this.transport!.write(`${JSON.stringify(req)}\n`);
    });
  }

  /** A client over a transport of the caller's choosing. */
  static async over(dial: Dial, onNotification?: (n: Notification) => void): Promise<DaemonClient> {
    const client = new DaemonClient(onNotification);
    client.transport = await dial({ data: (chunk) => client.onData(chunk), end: (reason) => client.ended(reason) });
    return client;
  }

  /** Where the daemon is: a socket path or an `ssh://` address. */
  get where(): string {
    return this.transport?.where ?? '';
  }

  private ended(reason: DaemonUnreachableError): void {
    this.lost ??= reason;
    this.rpc.rejectAllPendingRequests(this.lost.message);
    this.resolveClosed(this.lost);
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(10); nl !== -1; nl = chunk.indexOf(10, start)) {
      const line = Buffer.concat([...this.partial, chunk.subarray(start, nl)]).toString('utf8');
      this.partial = [];
      start = nl + 1;
      this.onLine(line);
    }
    if (start < chunk.length) this.partial.push(Buffer.from(chunk.subarray(start)));
  }

  private onLine(line: string): void {
    if (!line.trim()) return;
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      return; // a malformed frame cannot be matched to a request; the request's own answer still can be
    }
    for (const m of Array.isArray(message) ? message : [message]) this.dispatch(m);
  }

  private dispatch(m: unknown): void {
    if (typeof m !== 'object' || m === null) return;
    const msg = m as Record<string, unknown>;
    if (typeof msg.method === 'string' && !('id' in msg)) {
      this.onNotification?.({ method: msg.method, params: (msg.params ?? {}) as Record<string, unknown> });
    } else if ('id' in msg && msg.id !== null) {
      this.rpc.receive(msg as unknown as JSONRPCResponse);
    }
  }

  /**
   * Call a method and return its result; throws RpcCallError or DaemonUnreachableError. With a
   * `signal`, aborting it sends `$/cancelRequest` for this call (the daemon answers it as
   * cancelled, and stops a foreground exec it had started).
   */
  async call<T = any>(method: string, params: Record<string, unknown> = {}, opts: { signal?: AbortSignal } = {}): Promise<T> {
    if (this.lost) throw this.lost;
    if (opts.signal) return this.cancellable<T>(method, params, opts.signal);
    try {
      return (await this.rpc.request(method, params)) as T;
    } catch (err) {
      if (this.lost) throw this.lost;
      if (err instanceof JSONRPCErrorException) throw new RpcCallError(err.message, err.code, err.data);
      throw err;
    }
  }

  private cancels = 0;

  private async cancellable<T>(method: string, params: Record<string, unknown>, signal: AbortSignal): Promise<T> {
    // An id of its own (the library numbers its own requests), so the cancel can name it.
    const id = `c${++this.cancels}`;
    const cancel = () => this.notify('$/cancelRequest', { id });
    signal.addEventListener('abort', cancel, { once: true });
    try {
      const res = await this.rpc.requestAdvanced({ jsonrpc: '2.0', id, method, params });
      if (this.lost) throw this.lost;
      if (res.error) throw new RpcCallError(res.error.message, res.error.code, res.error.data);
      return res.result as T;
    } catch (err) {
      if (this.lost) throw this.lost;
      throw err;
    } finally {
      signal.removeEventListener('abort', cancel);
    }
  }

  /** Send a notification (no answer expected). */
  notify(method: string, params: Record<string, unknown> = {}): void {
    if (!this.lost) this.rpc.notify(method, params);
  }

  close(): void {
    this.lost ??= new DaemonUnreachableError(this.where, 'the client closed it', 'lost');
    this.transport?.close();
  }
}
