import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { Connection, type Method, type RequestContext } from '../../../src/rpc/connection.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const fn of cleanup.splice(0)) fn();
});

/** A Connection with `methods` over a real socket, and a client that collects the answers by id. */
async function serve(methods: Map<string, Method>) {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-signal-'));
  const path = join(dir, 's');
  const accepted: Socket[] = [];
  const connections: Connection[] = [];
  const server: Server = createServer((s) => {
    accepted.push(s);
    connections.push(new Connection(s, methods, 1024 * 1024, pino({ level: 'silent' })));
  });
  await new Promise<void>((r) => server.listen(path, r));
  const client = connect(path);
  cleanup.push(() => {
    client.destroy();
    for (const s of accepted) s.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const answers = new Map<unknown, (a: any) => void>();
  let held = '';
  client.setEncoding('utf8').on('data', (d: string) => {
    held += d;
    for (let nl = held.indexOf('\n'); nl !== -1; nl = held.indexOf('\n')) {
      const a = JSON.parse(held.slice(0, nl));
      held = held.slice(nl + 1);
      answers.get(a.id)?.(a);
    }
  });
  const send = (m: unknown): void => void client.write(`${JSON.stringify(m)}\n`);
  const call = (id: number | string, method: string): Promise<any> =>
    new Promise((resolve) => {
      answers.set(id, resolve);
      send({ jsonrpc: '2.0', id, method });
    });
  return { send, call, client, connections };
}

/** AbortControllers made while `fn` runs, counted by a subclass put in the global's place. */
async function controllersMadeBy(fn: () => Promise<void>): Promise<number> {
  const Real = globalThis.AbortController;
  let made = 0;
  globalThis.AbortController = class extends Real {
    constructor() {
      super();
      made++;
    }
  };
  try {
    await fn();
  } finally {
    globalThis.AbortController = Real;
  }
  return made;
}

describe("a request's signal", () => {
  it('is not made for a request whose method never reads it (Node keeps every AbortSignal to the next full collection)', async () => {
    const { call } = await serve(new Map<string, Method>([['quick', async () => ({ ok: true })]]));
    const made = await controllersMadeBy(async () => {
      for (let i = 1; i <= 50; i++) expect((await call(i, 'quick')).result).toEqual({ ok: true });
    });
    expect(made).toBe(0);
  });

  it('is never held in flight when its method answers at once, and a throw is still an error answer', async () => {
    const methods = new Map<string, Method>([
      ['now', () => ({ ok: true })],
      ['later', async () => ({ ok: true })],
      [
        'boom',
        () => {
          throw new Error('broken');
        },
      ],
    ]);
    const { call, connections } = await serve(methods);
    expect((await call(1, 'now')).result).toEqual({ ok: true });
    // A set and a delete per request remade the long-lived map's table every few requests: promoted, then garbage.
    const pending = (connections[0] as unknown as { pending: Map<unknown, unknown> }).pending;
    const sets = vi.spyOn(pending, 'set');
    for (let i = 2; i <= 20; i++) expect((await call(i, 'now')).result).toEqual({ ok: true });
    expect((await call(21, 'boom')).error).toMatchObject({ code: -32603 });
    expect(sets).not.toHaveBeenCalled();
    expect((await call(22, 'later')).result).toEqual({ ok: true });
    expect(sets).toHaveBeenCalledTimes(1);
  });

  it('aborts on $/cancelRequest once read, and when read only after the cancel came', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const seen: Record<string, boolean> = {};
    const methods = new Map<string, Method>([
      ['quick', async () => ({})],
      // Reads its signal at once, then waits: the cancel aborts the signal it holds.
      [
        'early',
        async (_p, rc: RequestContext) => {
          const signal = rc.signal;
          await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
          seen.early = signal.aborted;
          return {};
        },
      ],
      // Reads it only after the cancel came: the signal it is given is already aborted.
      [
        'late',
        async (_p, rc: RequestContext) => {
          await gate;
          seen.late = rc.signal.aborted;
          return {};
        },
      ],
      // Asks whether it was cancelled and waits for the cancel without making its signal (an exec before its spawn, and waiting for its end), then reads the signal.
      [
        'asks',
        async (_p, rc: RequestContext) => {
          seen.before = rc.cancellation.aborted;
          // One let go of before the cancel is not told; one that throws keeps no other from being told.
          let dropped = 0;
          const listener = () => dropped++;
          rc.cancellation.addEventListener('abort', listener);
          rc.cancellation.removeEventListener('abort', listener);
          rc.cancellation.addEventListener('abort', () => {
            throw new Error('a listener that throws');
          });
          await new Promise<void>((r) => rc.cancellation.addEventListener('abort', () => r(), { once: true }));
          seen.woken = true;
          await gate;
          seen.asked = rc.cancellation.aborted;
          seen.again = dropped === 0;
          seen.asksSignal = rc.signal.aborted;
          seen.after = rc.cancellation.aborted;
          return {};
        },
      ],
    ]);
    const { call, send } = await serve(methods);
    const early = call(1, 'early');
    const late = call('1', 'late');
    // Ids 1 and "1" are different requests: each cancel reaches its own.
    send({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 1 } });
    await early;
    expect(seen.early).toBe(true);
    expect(seen.late).toBeUndefined();
    let asks!: Promise<unknown>;
    const made = await controllersMadeBy(async () => {
      asks = call(3, 'asks');
      send({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: 3 } });
      await call(4, 'quick');
    });
    // Cancelled, asked and waited for so: no AbortController was made for it.
    expect(made).toBe(0);
    expect(seen.before).toBe(false);
    expect(seen.woken).toBe(true);
    send({ jsonrpc: '2.0', method: '$/cancelRequest', params: { id: '1' } });
    // Lines are handled in order: once a request after the cancel is answered, the cancel was read.
    await call(2, 'quick');
    release();
    await late;
    expect(seen.late).toBe(true);
    await asks;
    expect(seen).toMatchObject({ asked: true, again: true, asksSignal: true, after: true });
  });

  it('aborts when the connection closes, and tells who waits on its cancellation', async () => {
    let signal: AbortSignal | undefined;
    let told = false;
    const started = new Promise<void>((resolve) => {
      const methods = new Map<string, Method>([
        [
          'hold',
          (_p, rc: RequestContext) => {
            rc.cancellation.addEventListener('abort', () => (told = true), { once: true });
            signal = rc.signal;
            resolve();
            return new Promise(() => {});
          },
        ],
      ]);
      void serve(methods).then(({ call, client }) => {
        void call(1, 'hold');
        void started.then(() => client.destroy());
      });
    });
    await started;
    const deadline = Date.now() + 10_000;
    while (!signal!.aborted && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    expect(signal!.aborted).toBe(true);
    expect(told).toBe(true);
  });
});

describe("an answer's write", () => {
  it('carries no callback to an empty socket (Node makes a tick and an object for one), and one behind unsent bytes', async () => {
    const methods = new Map<string, Method>([['ping', () => ({ pong: true })]]);
    const { call, connections } = await serve(methods);
    await call(0, 'ping');
    const socket = connections[0].socket;
    const callbacks: boolean[] = [];
    const write = socket.write.bind(socket) as (...args: unknown[]) => boolean;
    let unsent = 0;
    Object.defineProperty(socket, 'writableLength', { configurable: true, get: () => unsent });
    (socket as unknown as { write: (...args: unknown[]) => boolean }).write = (...args: unknown[]) => {
      callbacks.push(typeof args[args.length - 1] === 'function');
      return write(...args);
    };
    expect((await call(1, 'ping')).result).toEqual({ pong: true });
    unsent = 1;
    expect((await call(2, 'ping')).result).toEqual({ pong: true });
    expect(callbacks).toEqual([false, true]);
  });
});
