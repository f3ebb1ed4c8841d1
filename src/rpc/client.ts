import { connect, type Socket } from 'node:net';
import { JSONRPCClient, JSONRPCErrorException, type JSONRPCResponse } from 'json-rpc-2.0';
import { resolveSocketPath } from '../config/paths.js';
import type { ErrorKind } from '../errors.js';

/** The daemon could not be reached, or the connection to it was lost mid-conversation. */
export class DaemonUnreachableError extends Error {
  constructor(
    readonly socketPath: string,
    readonly reason: string,
    readonly phase: 'connect' | 'lost',
    readonly code?: string,
  ) {
    super(phase === 'connect' ? `cannot reach procctld at ${socketPath} (${reason})` : `lost the connection to procctld at ${socketPath} (${reason})`);
    this.name = 'DaemonUnreachableError';
  }
}

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

export interface ClientOptions {
  /** An explicit socket path (the `--socket` flag); otherwise resolved as the daemon does. */
  socket?: string;
  env?: NodeJS.ProcessEnv;
  /** Called for every notification the daemon sends (subscription events). */
  onNotification?: (n: Notification) => void;
}

/** Human words for the errors a connect to a Unix socket can fail with. */
function describeConnectError(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ENOENT':
      return 'no socket there';
    case 'ECONNREFUSED':
      return 'nothing is listening on it';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOTSOCK':
      return 'not a socket';
    default:
      return err.message;
  }
}

/**
 * A client of the procctld socket: NDJSON framing, request ids and error exceptions from
 * json-rpc-2.0, notifications handed to a callback.
 */
export class DaemonClient {
  private readonly rpc: JSONRPCClient;
  /** Bytes of a line not yet complete; kept as Buffers so a character split across reads stays whole. */
  private partial: Buffer[] = [];
  private lost: DaemonUnreachableError | undefined;
  /** Resolves with the reason once the connection has closed, for whatever cause. */
  readonly closed: Promise<DaemonUnreachableError>;

  private constructor(
    private readonly socket: Socket,
    readonly socketPath: string,
    private readonly onNotification: ((n: Notification) => void) | undefined,
  ) {
    this.rpc = new JSONRPCClient((req) => {
      if (this.lost) throw this.lost;
      socket.write(`${JSON.stringify(req)}\n`);
    });
    let closeReason = 'the daemon closed it';
    this.closed = new Promise((resolve) => {
      socket.on('close', () => {
        this.lost ??= new DaemonUnreachableError(socketPath, closeReason, 'lost');
        this.rpc.rejectAllPendingRequests(this.lost.message);
        resolve(this.lost);
      });
    });
    socket.on('error', (err: NodeJS.ErrnoException) => (closeReason = describeConnectError(err)));
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
  }

  /** Connect to the daemon's socket; a DaemonUnreachableError says why it failed. */
  static connect(opts: ClientOptions = {}): Promise<DaemonClient> {
    const path = resolveSocketPath(opts.socket, opts.env ?? process.env);
    return new Promise((resolve, reject) => {
      const socket = connect(path);
      const onError = (err: NodeJS.ErrnoException) => reject(new DaemonUnreachableError(path, describeConnectError(err), 'connect', err.code));
      socket.once('error', onError);
      socket.once('connect', () => {
        socket.off('error', onError);
        resolve(new DaemonClient(socket, path, opts.onNotification));
      });
    });
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
    this.lost ??= new DaemonUnreachableError(this.socketPath, 'the client closed it', 'lost');
    this.socket.destroy();
  }
}
