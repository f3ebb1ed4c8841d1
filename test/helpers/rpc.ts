import { connectTo, NdjsonConnection } from './ndjson.js';

export interface RpcResponse {
  jsonrpc: '2.0';
  id: string | number | null;
  result?: any;
  error?: { code: number; message: string; data?: any };
}

/**
 * A raw NDJSON JSON-RPC client for tests: send any bytes, await responses by id, collect
 * notifications. Deliberately independent of src/ so it checks the wire format itself.
 */
export class TestClient extends NdjsonConnection {
  readonly notifications: any[] = [];
  readonly unmatched: RpcResponse[] = [];
  private nextId = 1;
  private readonly waiting = new Map<string, (r: RpcResponse) => void>();

  static async connect(path: string): Promise<TestClient> {
    return new TestClient(await connectTo(path));
  }

  private constructor(socket: Awaited<ReturnType<typeof connectTo>>) {
    super(socket);
    // A request the daemon never answers before the connection closes (an image winding down in
    // a restart) is answered here with an error, not left waiting for ever: a waitFor polling with
    // it then looks again, and its deadline can pass.
    socket.on('close', () => {
      for (const [key, answer] of this.waiting) answer(closedAnswer(key === 'batch' ? null : JSON.parse(key)));
      this.waiting.clear();
    });
  }

  protected override onLine(line: string): void {
    const msg = JSON.parse(line);
    if (!Array.isArray(msg) && msg.method !== undefined && msg.id === undefined) this.notifications.push(msg);
    else {
      const key = Array.isArray(msg) ? 'batch' : JSON.stringify(msg.id);
      const w = this.waiting.get(key);
      if (w) {
        this.waiting.delete(key);
        w(msg);
      } else this.unmatched.push(msg);
    }
  }

  /** Send raw text (a newline is not added). */
  sendRaw(text: string | Buffer): void {
    this.socket.write(text);
  }

  /** Call a method; resolves with the whole response (result or error). */
  request(method: string, params?: unknown, id: string | number = this.nextId++): Promise<RpcResponse> {
    if (this.closed) return Promise.resolve(closedAnswer(id));
    return new Promise((resolve) => {
      this.waiting.set(JSON.stringify(id), resolve);
      this.socket.write(`${JSON.stringify({ jsonrpc: '2.0', id, method, ...(params === undefined ? {} : { params }) })}\n`);
    });
  }

  /** Send a raw line and await the next response that is not matched by id (for bad frames). */
  async rawResponse(text: string, timeoutMs = 20_000): Promise<RpcResponse> {
    const before = this.unmatched.length;
    this.sendRaw(text);
    await this.until(() => this.unmatched.length > before || this.closed, timeoutMs);
    const r = this.unmatched[before];
    if (!r) throw new Error(`no response to ${text.slice(0, 80)}`);
    return r;
  }

  /** Call and return the result, throwing on an error response. */
  async call(method: string, params?: unknown): Promise<any> {
    const r = await this.request(method, params);
    if (r.error) throw Object.assign(new Error(r.error.message), { rpc: r.error });
    return r.result;
  }

  exec(params: Record<string, unknown>): Promise<any> {
    return this.call('exec', params);
  }

  process(params: Record<string, unknown>): Promise<any> {
    return this.call('process', params);
  }

  /** Resolve once `cond()` holds, re-checked on every message; reject after `timeoutMs`. */
  async until(cond: () => boolean, timeoutMs = 20_000): Promise<void> {
    if (!(await this.holds(cond, timeoutMs))) throw new Error('condition not met in time');
  }
}

/** The answer to a request whose connection closed first. */
function closedAnswer(id: string | number | null): RpcResponse {
  return { jsonrpc: '2.0', id, error: { code: -32000, message: 'the connection closed before an answer (test client)' } };
}
