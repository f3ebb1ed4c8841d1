import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes } from '../helpers/session.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;
const clients: TestClient[] = [];

beforeAll(async () => {
  d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' } });
  c = await d.client();
  scopes = new Scopes(() => c);
});

afterAll(async () => {
  try {
    await scopes.finish(d);
  } finally {
    for (const x of [c, ...clients]) x?.close();
    await stopAllDaemons();
  }
});

/** A fresh connection (notifications are per connection) bound to a fresh scope. */
async function listener(prefix: string, daemon = d): Promise<Scoped> {
  const client = await daemon.client();
  clients.push(client);
  return daemon === d ? scopes.next(prefix, client) : new Scoped(client, `${prefix}-${process.pid}`);
}

async function subscribe(s: Scoped, params: Record<string, unknown> = {}): Promise<string> {
  const r = await s.request('subscribe', params);
  expect(r.error).toBeUndefined();
  expect(typeof r.result.subscription).toBe('string');
  return r.result.subscription;
}

const eventsOf = (s: Scoped, sessionId?: string) =>
  s.c.notifications.filter((n) => n.method === 'event' && (sessionId === undefined || n.params.sessionId === sessionId)).map((n) => n.params);

async function exitedOf(s: Scoped, sessionId: string): Promise<any> {
  await s.c.until(() => eventsOf(s, sessionId).some((e) => e.type === 'exited'));
  return eventsOf(s, sessionId).find((e) => e.type === 'exited');
}

describe('subscribe', () => {
  it('streams started, output and exited, in that order', async () => {
    const s = await listener('stream');
    await subscribe(s);
    const r = await s.exec({ command: 'echo out-line; echo err-line >&2; exit 3' });
    const exited = await exitedOf(s, r.sessionId);
    const evs = eventsOf(s, r.sessionId);
    const types = evs.map((e) => e.type);
    expect(types[0]).toBe('started');
    expect(types[types.length - 1]).toBe('exited');
    expect(types.slice(1, -1).every((t) => t === 'output')).toBe(true);
    expect(evs[0]).toMatchObject({ sessionId: r.sessionId, command: 'echo out-line; echo err-line >&2; exit 3' });
    expect(Number.isNaN(Date.parse(evs[0].at))).toBe(false);
    const out = (stream: string) => evs.filter((e) => e.type === 'output' && e.stream === stream).map((e) => e.data).join('');
    expect(out('stdout')).toBe('out-line\n');
    expect(out('stderr')).toBe('err-line\n');
    expect(exited).toMatchObject({ status: 'completed', exitCode: 3, signal: null });
    expect(typeof exited.text).toBe('string');
    // A foreground session that ended within the call is not announced with a summary.
    expect(exited.summary).toBeUndefined();
  });

  it('filters by sessionId', async () => {
    const s = await listener('bysess');
    const one = await s.exec({ command: 'read x; echo "one-$x"', background: true });
    const two = await s.exec({ command: 'read x; echo "two-$x"', background: true });
    scopes.track(one.pid);
    scopes.track(two.pid);
    await subscribe(s, { sessionId: one.sessionId });
    await s.process({ action: 'write', sessionId: two.sessionId, data: 'b\n' });
    await s.waitEnded(two.sessionId);
    await s.process({ action: 'write', sessionId: one.sessionId, data: 'a\n' });
    await exitedOf(s, one.sessionId);
    expect(eventsOf(s, two.sessionId)).toEqual([]);
    expect(eventsOf(s, one.sessionId).filter((e) => e.type === 'output').map((e) => e.data).join('')).toBe('one-a\n');
  });

  it('filters by event type', async () => {
    const s = await listener('bytype');
    await subscribe(s, { events: ['exited'] });
    const r = await s.exec({ command: 'echo noisy' });
    await exitedOf(s, r.sessionId);
    expect(eventsOf(s).map((e) => e.type)).toEqual(['exited']);
  });

  it('refuses an unknown event type as invalid', async () => {
    const s = await listener('badtype');
    const e = await s.error('subscribe', { events: ['exploded'] });
    expect(e.data.kind).toBe('invalid');
    expect(e.data.path).toEqual(['events']);
  });

  it('a subscriber sees only its own scope', async () => {
    const mine = await listener('mine');
    const theirs = scopes.next('theirs');
    await subscribe(mine);
    const other = await theirs.exec({ command: 'echo secret', background: true });
    scopes.track(other.pid);
    await theirs.waitEnded(other.sessionId);
    const own = await mine.exec({ command: 'echo own' });
    await exitedOf(mine, own.sessionId);
    expect(eventsOf(mine, other.sessionId)).toEqual([]);
    expect(eventsOf(mine).every((e) => e.sessionId === own.sessionId)).toBe(true);
  });

  it('unsubscribe stops the stream', async () => {
    const s = await listener('unsub');
    const sub = await subscribe(s);
    const first = await s.exec({ command: 'echo 1' });
    await exitedOf(s, first.sessionId);
    expect((await s.request('unsubscribe', { subscription: sub })).error).toBeUndefined();
    const second = await s.exec({ command: 'echo 2' });
    // A fresh subscriber on another connection is the sync point: it sees the exit, the old one must not.
    const probe = await listener('unsub-probe');
    const probeScoped = new Scoped(probe.c, s.scope);
    await subscribe(probeScoped);
    const third = await s.exec({ command: 'echo 3' });
    await exitedOf(probeScoped, third.sessionId);
    expect(eventsOf(s, second.sessionId)).toEqual([]);
    expect(eventsOf(s, third.sessionId)).toEqual([]);
  });

  it('unsubscribe with a subscription that is not a string is invalid params naming the field, and the connection goes on', async () => {
    const s = await listener('unsub-bad');
    // An object without a usable toString once made the daemon answer an internal error.
    for (const subscription of [{ toString: null }, 7, null, ['sub-1']]) {
      const r = await s.request('unsubscribe', { subscription });
      expect(r.error?.code).toBe(-32602);
      expect(r.error?.message).toMatch(/subscription must be a string/);
    }
    expect((await s.exec({ command: 'echo still' })).output).toContain('still');
  });
});

describe('exit summaries (notifyOnExit)', () => {
  it('a backgrounded session that exits carries "Exec completed (<id>, code N) :: <last line>"', async () => {
    const s = await listener('sum');
    await subscribe(s, { events: ['exited'] });
    const r = await s.exec({ command: 'read x; echo first; echo "last line here"', background: true });
    scopes.track(r.pid);
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    const e = await exitedOf(s, r.sessionId);
    expect(e.summary).toBe(`Exec completed (${r.sessionId}, code 0) :: last line here`);
  });

  it('a backgrounded session with a non-zero exit says its code', async () => {
    const s = await listener('sum3');
    await subscribe(s, { events: ['exited'] });
    const r = await s.exec({ command: 'read x; echo broke >&2; exit 3', background: true });
    scopes.track(r.pid);
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    const e = await exitedOf(s, r.sessionId);
    expect(e.summary).toMatch(new RegExp(`^Exec (completed|failed) \\(${r.sessionId}, code 3\\) :: broke$`));
  });

  it('a session that yielded (exec returned running) is announced too', async () => {
    const s = await listener('sumyield');
    await subscribe(s, { events: ['exited'] });
    const r = await s.exec({ command: 'read x; echo yielded-then-done', yieldMs: 50 });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    const e = await exitedOf(s, r.sessionId);
    expect(e.summary).toBe(`Exec completed (${r.sessionId}, code 0) :: yielded-then-done`);
  });

  it('a killed backgrounded session says "Exec failed (<id>, signal S...)"', async () => {
    const s = await listener('sumkill');
    await subscribe(s, { events: ['exited'] });
    const r = await s.exec({ command: 'sleep 600', background: true });
    scopes.track(r.pid);
    await s.process({ action: 'kill', sessionId: r.sessionId });
    const e = await exitedOf(s, r.sessionId);
    expect(e.status).toBe('failed');
    expect(e.reason).toBe('user');
    expect(e.summary.startsWith(`Exec failed (${r.sessionId}, signal SIGTERM`)).toBe(true);
  });

  it('a silent successful backgrounded session gets no summary by default', async () => {
    const s = await listener('silent');
    await subscribe(s, { events: ['exited'] });
    const r = await s.exec({ command: 'read x; true', background: true });
    scopes.track(r.pid);
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    const e = await exitedOf(s, r.sessionId);
    expect(e.status).toBe('completed');
    expect(e.summary).toBeUndefined();
  });

  describe('with PROCCTL_NOTIFY_ON_EXIT_EMPTY_SUCCESS=true', () => {
    let d2: TestDaemon;
    beforeAll(async () => {
      d2 = await startDaemon({ env: { PROCCTL_NOTIFY_ON_EXIT_EMPTY_SUCCESS: 'true' } });
    });

    it('a silent successful backgrounded session gets a summary', async () => {
      const s = await listener('silent2', d2);
      await subscribe(s, { events: ['exited'] });
      const r = await s.exec({ command: 'read x; true', background: true });
      await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
      const e = await exitedOf(s, r.sessionId);
      expect(e.summary).toBe(`Exec completed (${r.sessionId}, code 0)`);
      expect(await d2.stop()).toBe(0);
    });
  });

  describe('with PROCCTL_NOTIFY_ON_EXIT=false', () => {
    it('no exited event carries a summary', async () => {
      const d3 = await startDaemon({ env: { PROCCTL_NOTIFY_ON_EXIT: 'false' } });
      const s = await listener('nonotify', d3);
      await subscribe(s, { events: ['exited'] });
      const r = await s.exec({ command: 'read x; echo hi', background: true });
      await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
      const e = await exitedOf(s, r.sessionId);
      expect(e.summary).toBeUndefined();
      expect(await d3.stop()).toBe(0);
    });
  });
});
