import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import { waitGone } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scopes, type Scoped, sharedDaemon } from '../helpers/session.js';
import { freePort } from '../helpers/net.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '3000' } }, (x) => ({ d, c, scopes } = x));


/**
 * A server on a fixed port that takes its time to stop: on SIGTERM it keeps the port for 700 ms
 * more. A successor started before it is gone fails with EADDRINUSE.
 */
const server = (port: number) =>
  `exec node -e "process.on('SIGTERM', () => setTimeout(() => process.exit(0), 700)); require('net').createServer().listen(${port}, '127.0.0.1', () => console.log('listening'))"`;

async function startKeyed(s: Scoped, command: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await s.exec({ command, key: 'srv', background: true, ...extra });
  scopes.track(r.pid);
  return r;
}

const running = async (s: Scoped) => (await s.list()).filter((x) => x.status === 'running' && x.key === 'srv');

describe('thread keys', () => {
  it('replace stops the running session and starts the new one only once it is gone', async () => {
    const s = scopes.next('replace');
    const port = await freePort();
    const first = await startKeyed(s, server(port));
    expect(first.status).toBe('running');
    await s.waitOutput(first.sessionId, 'listening');

    const second = await startKeyed(s, server(port), { ifRunning: 'replace' });
    expect(second.status).toBe('running');
    expect(second.sessionId).not.toBe(first.sessionId);
    const old = (await s.list()).find((x) => x.sessionId === first.sessionId);
    expect(old).toMatchObject({ status: 'failed', reason: 'replaced' });
    expect(old.stop).toMatchObject({ reason: 'replaced' });
    expect(await waitGone([first.pid], 1000)).toEqual([]);

    await s.waitOutput(second.sessionId, 'listening');
    const log = await s.log(second.sessionId, { offset: 0 });
    expect(log.output).not.toContain('EADDRINUSE');
    expect((await running(s)).map((x) => x.sessionId)).toEqual([second.sessionId]);
    await s.process({ action: 'kill', sessionId: second.sessionId });
  });

  it('replace is the default for a key', async () => {
    const s = scopes.next('default');
    const first = await startKeyed(s, 'sleep 600');
    const second = await startKeyed(s, 'sleep 600');
    expect((await s.list()).find((x) => x.sessionId === first.sessionId)).toMatchObject({ status: 'failed', reason: 'replaced' });
    expect((await running(s)).map((x) => x.sessionId)).toEqual([second.sessionId]);
    await s.process({ action: 'kill', sessionId: second.sessionId });
  });

  it('reject is a conflict naming the running session', async () => {
    const s = scopes.next('reject');
    const first = await startKeyed(s, 'sleep 600');
    const err = await s.error('exec', { command: 'sleep 600', key: 'srv', ifRunning: 'reject', background: true });
    expect(err.data?.kind).toBe('conflict');
    expect(err.message).toContain(first.sessionId);
    expect(err.data?.sessionId).toBe(first.sessionId);
    expect((await s.list()).map((x) => x.sessionId)).toEqual([first.sessionId]);
    await s.process({ action: 'kill', sessionId: first.sessionId });
    // With nothing running under the key, reject starts the command.
    const next = await startKeyed(s, 'echo fresh', { ifRunning: 'reject', background: false });
    expect(next).toMatchObject({ status: 'completed', output: 'fresh\n' });
  });

  it('keep returns the running session instead of starting another', async () => {
    const s = scopes.next('keep');
    const first = await startKeyed(s, 'sleep 600');
    const again = await s.exec({ command: 'echo should-not-run', key: 'srv', ifRunning: 'keep' });
    expect(again).toMatchObject({ status: 'running', sessionId: first.sessionId, pid: first.pid });
    expect((await s.list()).map((x) => x.sessionId)).toEqual([first.sessionId]);
    await s.process({ action: 'kill', sessionId: first.sessionId });
  });

  it('keys are per scope', async () => {
    const a = scopes.next('key-a');
    const b = scopes.next('key-b');
    const ra = await startKeyed(a, 'sleep 600');
    const rb = await startKeyed(b, 'sleep 600', { ifRunning: 'reject' });
    expect(rb.status).toBe('running');
    expect((await a.list()).find((x) => x.sessionId === ra.sessionId).status).toBe('running');
    await a.process({ action: 'kill', sessionId: ra.sessionId });
    await b.process({ action: 'kill', sessionId: rb.sessionId });
  });

  it('two concurrent replaces never leave two sessions of the key running', async () => {
    const s = scopes.next('race');
    const port = await freePort();
    const first = await startKeyed(s, server(port));
    await s.waitOutput(first.sessionId, 'listening');
    const overlaps: string[][] = [];
    let done = false;
    const watch = (async () => {
      while (!done) {
        const now = (await running(s)).map((x) => x.sessionId);
        if (now.length > 1) overlaps.push(now);
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    const [x, y] = await Promise.all([startKeyed(s, server(port)), startKeyed(s, server(port))]);
    const live = await running(s);
    done = true;
    await watch;
    expect(overlaps).toEqual([]);
    expect(live).toHaveLength(1);
    const winner = live[0].sessionId;
    expect([x.sessionId, y.sessionId]).toContain(winner);
    const loser = [x, y].find((r) => r.sessionId !== winner);
    expect((await s.list()).find((r) => r.sessionId === loser.sessionId)).toMatchObject({ status: 'failed', reason: 'replaced' });
    await s.waitOutput(winner, 'listening');
    // Every one of them bound the port in turn: none ever met the one before it.
    for (const r of await s.list()) expect((await s.log(r.sessionId, { offset: 0 })).output, r.sessionId).not.toContain('EADDRINUSE');
    await waitFor(async () => (await s.list()).filter((r) => r.status === 'running').length === 1, { what: 'one running session' });
    await s.process({ action: 'kill', sessionId: winner });
  });
});
