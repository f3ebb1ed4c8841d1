import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';

let d: TestDaemon;
let c: TestClient;

beforeAll(async () => {
  d = await startDaemon();
  c = await d.client();
});

afterAll(async () => {
  c?.close();
  await stopAllDaemons();
});

describe('daemon.diagnostics', () => {
  it('the default answer is the cheap one: no object counts (their full garbage collections hold every client); the first call starts the loop-delay watch, later ones report it', async () => {
    const first = await c.call('daemon.diagnostics');
    expect(first.objects).toBeUndefined();
    expect(first).toMatchObject({ rss: expect.any(Number), heapUsed: expect.any(Number), fds: expect.any(Number), resources: expect.any(Object) });
    const second = await c.call('daemon.diagnostics');
    expect(second.eventLoopDelay).toMatchObject({ p50: expect.any(Number), p99: expect.any(Number), max: expect.any(Number), count: expect.any(Number) });
  });

  it('objects: true, asked for by name, counts the live objects; objects: false is the default said out loud', async () => {
    const counted = await c.call('daemon.diagnostics', { objects: true });
    expect(counted.objects).toMatchObject({ Session: 0, SessionOutput: 0, Spool: 0, Socket: expect.any(Number) });
    const r = await c.call('daemon.diagnostics', { objects: false });
    expect(r.objects).toBeUndefined();
    expect(r).toMatchObject({ rss: expect.any(Number), fds: expect.any(Number), eventLoopDelay: { p99: expect.any(Number) } });
  });

  it('an unknown parameter or a non-boolean objects is invalid params, naming it', async () => {
    const bad = await c.request('daemon.diagnostics', { object: false });
    expect(bad.error).toMatchObject({ code: -32602 });
    expect(bad.error!.message).toContain('"object"');
    const notBool = await c.request('daemon.diagnostics', { objects: 'no' });
    expect(notBool.error).toMatchObject({ code: -32602 });
    expect(notBool.error!.message).toContain('objects must be true or false');
  });
});
