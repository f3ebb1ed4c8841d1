import { afterAll, beforeAll, expect } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type StartOptions, type TestDaemon } from './daemon.js';
import { killLeftovers, leftovers, waitGone } from './procs.js';
import type { RpcResponse, TestClient } from './rpc.js';

/** A client view bound to one scope (and its token), so tests sharing a daemon do not see each other. */
export class Scoped {
  constructor(
    readonly c: TestClient,
    readonly scope: string,
    readonly token?: string,
  ) {}

  private extra(): Record<string, string> {
    return this.token === undefined ? { scope: this.scope } : { scope: this.scope, token: this.token };
  }

  exec(p: Record<string, unknown>): Promise<any> {
    return this.c.exec({ ...p, ...this.extra() });
  }

  process(p: Record<string, unknown>): Promise<any> {
    return this.c.process({ ...p, ...this.extra() });
  }

  request(method: string, p: Record<string, unknown> = {}, id?: string | number): Promise<RpcResponse> {
    return this.c.request(method, { ...p, ...this.extra() }, id);
  }

  /** The error a call answers with; fails the test if it succeeds. */
  async error(method: string, p: Record<string, unknown>): Promise<NonNullable<RpcResponse['error']>> {
    const r = await this.request(method, p);
    if (!r.error) throw new Error(`expected ${method} ${JSON.stringify(p)} to fail, got ${JSON.stringify(r.result).slice(0, 300)}`);
    return r.error;
  }

  async list(): Promise<any[]> {
    return (await this.process({ action: 'list' })).sessions;
  }

  async log(sessionId: string, extra: Record<string, unknown> = {}): Promise<any> {
    return this.process({ action: 'log', sessionId, ...extra });
  }

  /** Wait until the retained output (read with `log`, which never drains) contains `text`. */
  async waitOutput(sessionId: string, text: string, timeoutMs = 20_000): Promise<void> {
    await waitFor(async () => (await this.log(sessionId, { offset: 0 })).output.includes(text), { timeoutMs, what: `output "${text}"` });
  }

  /** Poll (draining) until the session has ended; returns the last poll and everything drained. */
  async pollUntilEnded(sessionId: string, timeoutMs = 20_000): Promise<{ last: any; output: string }> {
    const deadline = Date.now() + timeoutMs;
    let output = '';
    for (;;) {
      const r = await this.process({ action: 'poll', sessionId, timeout: 2000 });
      output += r.output;
      if (r.status !== 'running') return { last: r, output };
      if (Date.now() > deadline) throw new Error(`session ${sessionId} still running after ${timeoutMs} ms`);
    }
  }

  /** Wait until the session is no longer running (without draining). */
  async waitEnded(sessionId: string, timeoutMs = 20_000): Promise<any> {
    return waitFor(
      async () => {
        const s = (await this.list()).find((x) => x.sessionId === sessionId);
        return s && s.status !== 'running' ? s : undefined;
      },
      { timeoutMs, what: `session ${sessionId} to end` },
    );
  }
}

let counter = 0;

/** Hands out fresh scopes on a shared daemon and remembers every session pid they started. */
export class Scopes {
  private readonly names = new Set<string>();
  readonly pids = new Set<number>();

  constructor(private readonly c: () => TestClient) {}

  next(prefix = 't', client = this.c()): Scoped {
    const name = `${prefix}-${process.pid}-${++counter}`;
    this.names.add(name);
    return new Scoped(client, name);
  }

  track(pid: number | null | undefined): void {
    if (typeof pid === 'number') this.pids.add(pid);
  }

  /** Record the pid of every session still listed in any scope handed out. */
  async collect(): Promise<void> {
    for (const scope of this.names) {
      const r = await this.c().request('process', { action: 'list', scope });
      for (const s of r.result?.sessions ?? []) this.track(s.pid);
    }
  }

  /** Collect pids, stop the daemon (expecting exit 0), and check that nothing they started is left. */
  async finish(d: TestDaemon): Promise<void> {
    await this.collect();
    const code = await d.stop();
    const left = await waitGone(this.pids, 5000);
    killLeftovers(left);
    expect(left, `processes left behind: ${left.join(', ')}`).toEqual([]);
    expect(code).toBe(0);
    expect(leftovers(this.pids)).toEqual([]);
  }
}

/** A promise that rejects after `ms` (an upper bound, never a synchronisation point). */
export function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout;
  return Promise.race([
    p.finally(() => clearTimeout(timer)),
    new Promise<T>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
    }),
  ]);
}

export interface SharedDaemon {
  d: TestDaemon;
  c: TestClient;
  scopes: Scopes;
}

/**
 * One daemon for a whole test file: started before its tests, and at the end every scope's
 * processes checked gone, the client closed and the daemon stopped. `use` hands the parts over.
 */
export function sharedDaemon(opts: StartOptions, use: (shared: SharedDaemon) => void): void {
  let shared: SharedDaemon | undefined;
  beforeAll(async () => {
    const d = await startDaemon(opts);
    const c = await d.client();
    shared = { d, c, scopes: new Scopes(() => c) };
    use(shared);
  });
  afterAll(async () => {
    try {
      if (shared) await shared.scopes.finish(shared.d);
    } finally {
      shared?.c.close();
      await stopAllDaemons();
    }
  });
}

/** A tool's call context's cancel for a call made in-process: never cancelled (its signal and its cancellation, one object). */
export function uncancelled(): { signal: AbortSignal; cancellation: AbortSignal } {
  const signal = new AbortController().signal;
  return { signal, cancellation: signal };
}
