import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { sharedDaemon, type Scoped, type Scopes } from '../helpers/session.js';

let scopes: Scopes;
sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' } }, (x) => ({ scopes } = x));

/** A port this test process listens on: no session's. */
let unrelated: Server;
let unrelatedPort: number;
beforeAll(async () => {
  unrelated = createServer();
  await new Promise<void>((resolve) => unrelated.listen(0, '127.0.0.1', resolve));
  unrelatedPort = (unrelated.address() as { port: number }).port;
});
afterAll(() => new Promise<void>((resolve) => unrelated.close(() => resolve())));

/** A node server on a port the kernel picks, at `host` (none: every address), that prints its port; a line on stdin closes it. */
const nodeServer = (host?: string) =>
  `exec node -e "const s = require('net').createServer().listen(0${host ? `, '${host}'` : ''}, () => console.log('port', s.address().port)); process.stdin.once('data', () => s.close(() => console.log('closed')))"`;

async function portOf(s: Scoped, sessionId: string): Promise<number> {
  const line = await waitFor(async () => /port (\d+)/.exec((await s.log(sessionId, { offset: 0 })).output), { what: 'the server to print its port' });
  return Number(line[1]);
}

const listed = async (s: Scoped, sessionId: string) => (await s.list()).find((x) => x.sessionId === sessionId);

describe('ports a session listens on (SPEC §20)', () => {
  it('list and poll show the port a node server listens on, with its address; a port closed disappears', async () => {
    const s = scopes.next('ports');
    const r = await s.exec({ command: nodeServer('127.0.0.1'), background: true });
    scopes.track(r.pid);
    const port = await portOf(s, r.sessionId);
    const rec = await waitFor(async () => {
      const x = await listed(s, r.sessionId);
      return x?.ports?.length ? x : undefined;
    }, { what: 'list to show the port' });
    expect(rec.ports).toEqual([{ address: '127.0.0.1', port }]);
    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.ports).toEqual([{ address: '127.0.0.1', port }]);
    expect(p.text).toContain(`[listening on 127.0.0.1:${port}]`);
    // Closed: gone from list once looked at again, while the process runs on.
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'close\n' });
    await s.waitOutput(r.sessionId, 'closed');
    await waitFor(async () => (await listed(s, r.sessionId))?.ports === undefined, { what: 'the closed port to leave the list' });
    expect((await listed(s, r.sessionId)).status).toBe('running');
    expect((await s.process({ action: 'poll', sessionId: r.sessionId })).ports).toBeUndefined();
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('a server on every address shows "::" (v6, dual stack); python3 -m http.server 0 too', async () => {
    const s = scopes.next('ports-any');
    const r = await s.exec({ command: nodeServer(), background: true });
    scopes.track(r.pid);
    const port = await portOf(s, r.sessionId);
    await waitFor(async () => (await s.process({ action: 'poll', sessionId: r.sessionId })).ports?.some((x: { port: number; address: string }) => x.port === port && x.address === '::'), {
      what: 'poll to show :: and the port',
    });
    const py = await s.exec({ command: 'exec python3 -u -m http.server 0 --bind 127.0.0.1', background: true });
    scopes.track(py.pid);
    const pyPort = Number((await waitFor(async () => /port (\d+)/.exec((await s.log(py.sessionId, { offset: 0 })).output), { what: 'python to say its port' }))[1]);
    await waitFor(async () => (await listed(s, py.sessionId))?.ports?.[0]?.port === pyPort, { what: 'list to show python\'s port' });
    await s.process({ action: 'kill', sessionId: r.sessionId });
    await s.process({ action: 'kill', sessionId: py.sessionId });
  });

  it('a port opened by an unrelated process is not shown; a session that listens on nothing shows none', async () => {
    const s = scopes.next('ports-none');
    // It even connects to the unrelated port: a connected socket is not a listening one.
    const r = await s.exec({ command: `exec node -e "require('net').connect(${unrelatedPort}, '127.0.0.1', () => console.log('connected')); setInterval(() => {}, 1000)"`, background: true });
    scopes.track(r.pid);
    await s.waitOutput(r.sessionId, 'connected');
    const withServer = await s.exec({ command: nodeServer('127.0.0.1'), background: true });
    scopes.track(withServer.pid);
    const port = await portOf(s, withServer.sessionId);
    // Once the other session's port is seen, both have been looked at in the same state of the host.
    await waitFor(async () => (await listed(s, withServer.sessionId))?.ports?.length, { what: 'the server session to show its port' });
    const none = await listed(s, r.sessionId);
    expect(none.ports).toBeUndefined();
    expect((await s.process({ action: 'poll', sessionId: r.sessionId })).ports).toBeUndefined();
    expect((await listed(s, withServer.sessionId)).ports.map((x: { port: number }) => x.port)).toEqual([port]);
    await s.process({ action: 'kill', sessionId: r.sessionId });
    await s.process({ action: 'kill', sessionId: withServer.sessionId });
  });

  it('an exec answered running after its wait says where it listens', async () => {
    const s = scopes.next('ports-exec');
    const r = await s.exec({ command: nodeServer('127.0.0.1'), waitFor: { output: '^port \\d+' }, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r).toMatchObject({ status: 'running', ready: true });
    const port = Number(/port (\d+)/.exec(r.tail)![1]);
    expect(r.ports).toEqual([{ address: '127.0.0.1', port }]);
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('the final record keeps the ports it was last seen listening on', async () => {
    const s = scopes.next('ports-final');
    const r = await s.exec({ command: nodeServer('127.0.0.1'), background: true });
    scopes.track(r.pid);
    const port = await portOf(s, r.sessionId);
    await waitFor(async () => (await s.process({ action: 'poll', sessionId: r.sessionId })).ports?.length, { what: 'poll to show the port' });
    await s.process({ action: 'kill', sessionId: r.sessionId });
    const end = await s.waitEnded(r.sessionId);
    expect(end.status).toBe('failed');
    expect((await listed(s, r.sessionId)).ports).toEqual([{ address: '127.0.0.1', port }]);
    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.text).toContain(`[listening on 127.0.0.1:${port} when last seen]`);
  });
});
