import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { logLines } from '../helpers/state.js';
import { alive, asPerson, startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes } from '../helpers/session.js';

let d: TestDaemon;
let c: TestClient;
let c2: TestClient;
let scopes: Scopes;

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

beforeAll(async () => {
  // A session waits on stdin while another scope pokes at it: no waiting-for-input detection (SPEC §7) here.
  d = await startDaemon({
    config: {
      scopes: {
        locked: { token: `sha256:${sha256('s3cret')}` },
        plain: { token: 'pl4in' },
        fg: { background: false },
        root: { elevated: 'allow' },
        asks: { elevated: 'ask' },
      },
      adminToken: `sha256:${sha256('0perator')}`,
    },
    env: { PROCCTL_KILL_GRACE_MS: '1000', PROCCTL_INTERRUPT: 'false' },
  });
  c = await d.client();
  c2 = await d.client();
  scopes = new Scopes(() => c);
});

afterAll(async () => {
  try {
    await scopes.finish(d);
  } finally {
    c?.close();
    c2?.close();
    await stopAllDaemons();
  }
});

describe('scope isolation', () => {
  it('a session of scope a is not_found from scope b for every action, and not in b list', async () => {
    const a = scopes.next('a');
    const b = scopes.next('b', c2);
    const r = await a.exec({ command: 'cat', background: true });
    scopes.track(r.pid);
    const id = r.sessionId;

    for (const p of [
      { action: 'poll', sessionId: id },
      { action: 'poll', sessionId: id, timeout: 100 },
      { action: 'log', sessionId: id },
      { action: 'write', sessionId: id, data: 'from-b\n' },
      { action: 'write', sessionId: id, eof: true },
      { action: 'kill', sessionId: id },
      { action: 'clear', sessionId: id },
      { action: 'remove', sessionId: id },
    ]) {
      const e = await b.error('process', p);
      expect(e.data.kind, `${p.action} from another scope`).toBe('not_found');
      expect(e.message).not.toContain(a.scope);
    }
    const viaTool = await b.request('tool', { tool: 'process', action: 'log', sessionId: id });
    expect(viaTool.error?.data.kind).toBe('not_found');
    const sub = await b.request('subscribe', { sessionId: id });
    expect(sub.error?.data.kind).toBe('not_found');

    expect(await b.list()).toEqual([]);
    const kAll = await b.process({ action: 'kill', all: true });
    expect(kAll.sessions).toEqual([]);

    // Nothing b did reached the session: still running, stdin still open, nothing written.
    expect(alive(r.pid)).toBe(true);
    const listed = await a.list();
    expect(listed.map((x) => x.sessionId)).toEqual([id]);
    expect(listed[0].status).toBe('running');
    await a.process({ action: 'write', sessionId: id, data: 'from-a\n', eof: true });
    const { last, output } = await a.pollUntilEnded(id);
    expect(last.status).toBe('completed');
    expect(output).toBe('from-a\n');
  });

  it('the default scope does not see named scopes either', async () => {
    const a = scopes.next('named');
    const r = await a.exec({ command: 'echo x' });
    const list = await c2.process({ action: 'list' });
    expect(list.sessions.map((x: any) => x.sessionId)).not.toContain(r.sessionId);
    const e = await c2.request('process', { action: 'log', sessionId: r.sessionId });
    expect(e.error?.data.kind).toBe('not_found');
  });

  it('refuses a malformed scope name as invalid', async () => {
    const e = await c.request('exec', { command: 'true', scope: 'bad scope/../x' });
    expect(e.error?.data.kind).toBe('invalid');
    expect(e.error?.data.path).toEqual(['scope']);
  });
});

describe('scope tokens', () => {
  const locked = () => new Scoped(c, 'locked');
  const wrong = () => new Scoped(c, 'locked', 'wrong');
  const right = () => new Scoped(c, 'locked', 's3cret');

  it.each([
    ['exec', { command: 'echo should-not-run' }],
    ['tool', { tool: 'exec', command: 'echo should-not-run' }],
    ['tool', { tool: 'process', action: 'list' }],
    ['subscribe', {}],
    ['checkpoint', { sessionId: 'abcdefgh', name: 'step' }],
    ...['list', 'poll', 'log', 'write', 'send-keys', 'submit', 'paste', 'resize', 'resume', 'kill', 'signal', 'clear', 'remove'].map(
      (action) => ['process', { action, sessionId: 'abcdefgh', data: 'x', keys: ['Enter'], text: 'x', cols: 80, rows: 24, input: { eof: true }, signal: 'SIGINT' }] as const,
    ),
  ])('refuses %s %j without the token, and with a wrong one, as forbidden', async (method, params) => {
    const e1 = await locked().error(method, params);
    expect(e1.data.kind).toBe('forbidden');
    const e2 = await wrong().error(method, params);
    expect(e2.data.kind).toBe('forbidden');
    expect(e2.message).not.toContain('s3cret');
  });

  it("logs a refusal with the peer's pid and uid, never a token; a plain stored token works and is warned about", async () => {
    await new Scoped(c, 'locked', 'not-the-token').error('process', { action: 'list' });
    const refusals = logLines(d.stdout()).filter((l) => /refused a request/.test(l.msg) && l.scope === 'locked');
    expect(refusals.length).toBeGreaterThan(0);
    expect(refusals.at(-1).peer).toEqual({ pid: process.pid, uid: process.getuid!(), gid: process.getgid!() });
    expect(d.stdout()).not.toContain('not-the-token');
    expect(d.stdout()).not.toContain('s3cret');
    expect(d.stdout()).not.toContain('0perator');
    expect(JSON.stringify(await c.call('daemon.status'))).not.toMatch(/s3cret|pl4in|0perator|sha256/);
    expect(logLines(d.stdout()).some((l) => /plain text/.test(l.msg) && l.keys?.includes('scopes.plain.token'))).toBe(true);
    expect((await new Scoped(c, 'plain', 'pl4in').exec({ command: 'echo plain' })).output).toBe('plain\n');
    expect((await new Scoped(c, 'plain', `sha256:${sha256('pl4in')}`).error('process', { action: 'list' })).data.kind).toBe('forbidden');
  });

  it('refuses a token that only shares a prefix with the right one', async () => {
    const e = await new Scoped(c, 'locked', 's3cre').error('process', { action: 'list' });
    expect(e.data.kind).toBe('forbidden');
    const e2 = await new Scoped(c, 'locked', 's3cret2').error('process', { action: 'list' });
    expect(e2.data.kind).toBe('forbidden');
  });

  it('nothing ran for the refused requests, and the right token works', async () => {
    const s = right();
    const before = await s.list();
    expect(before.filter((x) => x.command.includes('should-not-run'))).toEqual([]);
    const r = await s.exec({ command: 'echo allowed' });
    expect(r.output).toBe('allowed\n');
    expect((await s.list()).map((x) => x.sessionId)).toContain(r.sessionId);
    const e = await locked().error('process', { action: 'log', sessionId: r.sessionId });
    expect(e.data.kind).toBe('forbidden');
  });

  it('scopes without a configured token need none', async () => {
    const s = scopes.next('open');
    const r = await s.exec({ command: 'echo open' });
    expect(r.output).toBe('open\n');
  });
});

describe("the operator's view (scope '*' with the adminToken)", () => {
  it("lists every scope with each session's scope, and polls, pages and kills by id in any scope", async () => {
    const a = scopes.next('opa');
    const r1 = await a.exec({ command: 'echo from-a' });
    const r2 = await new Scoped(c, 'locked', 's3cret').exec({ command: 'sleep 600', background: true });
    scopes.track(r2.pid);
    const admin = new Scoped(c, '*', '0perator');
    const all = await admin.process({ action: 'list' });
    const byId = new Map(all.sessions.map((s: any) => [s.sessionId, s.scope]));
    expect(byId.get(r1.sessionId)).toBe(a.scope);
    expect(byId.get(r2.sessionId)).toBe('locked');
    expect(all.total).toBe(all.sessions.length);
    expect((await admin.log(r1.sessionId)).output).toBe('from-a');
    expect((await admin.process({ action: 'poll', sessionId: r2.sessionId })).status).toBe('running');
    const k = await admin.process({ action: 'kill', sessionId: r2.sessionId });
    expect(k).toMatchObject({ status: 'failed', reason: 'user' });
    // Others still see only their own.
    expect((await a.list()).map((s) => s.sessionId)).toEqual([r1.sessionId]);
    expect((await a.list())[0].scope).toBeUndefined();
  });

  it("refuses '*' without the adminToken, with a scope's token, and for exec", async () => {
    for (const token of [undefined, 'wrong', 's3cret']) {
      const e = await new Scoped(c, '*', token).error('process', { action: 'list' });
      expect(e.data.kind, String(token)).toBe('forbidden');
    }
    const e = await new Scoped(c, '*', '0perator').error('exec', { command: 'echo nowhere' });
    expect(e.data.kind).toBe('invalid');
    expect(e.message).toMatch(/one scope/);
  });
});

describe('per-scope policy', () => {
  it('background:false runs in the foreground until the end, whatever yieldMs and background say, and says so first', async () => {
    const s = new Scoped(c, 'fg');
    for (const params of [{ background: true }, { yieldMs: 10 }]) {
      const r = await s.exec({ command: 'sleep 0.5; echo finished', ...params });
      expect(r.status, JSON.stringify(params)).toBe('completed');
      expect(r.output).toBe('finished\n');
      expect(r.text.split('\n')[0]).toBe('Warning: background sessions are disabled for scope "fg"; ran in the foreground.');
    }
    // Its timeout still ends it.
    const t = await s.exec({ command: 'sleep 600', timeout: 0.5 });
    expect(t).toMatchObject({ status: 'failed', reason: 'timeout' });
  });

  it('elevated is forbidden by default, naming the key that would allow it, and runs where allowed', async () => {
    const e = await scopes.next('plainscope').error('exec', { command: 'id -u', elevated: true });
    expect(e.data.kind).toBe('forbidden');
    expect(e.message).toMatch(/scopes\.plainscope[^ ]*\.elevated/);
    const r = await new Scoped(c, 'root').exec({ command: 'echo elevated', elevated: true });
    expect(r.output).toBe('elevated\n');
  });

  it('elevated "ask" waits for an approval naming the key; confirm runs it, refuse runs nothing; without elevated it runs at once', async () => {
    const s = new Scoped(c, 'asks');
    expect((await s.exec({ command: 'echo plain' })).output).toBe('plain\n');
    const asked = await s.exec({ command: 'echo elevated', elevated: true });
    expect(asked).toMatchObject({ status: 'approval_required', interrupt: { kind: 'approval' } });
    expect(asked.interrupt.reason).toContain('scopes.asks.elevated');
    const ran = await s.process({ action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, ...asPerson(d) });
    expect(ran).toMatchObject({ sessionId: asked.sessionId, status: 'completed', output: 'elevated\n' });

    const marker = join(d.dir, 'elevated-ran');
    const refused = await s.exec({ command: `touch ${marker}`, elevated: true });
    const no = await s.process({ action: 'resume', sessionId: refused.sessionId, input: { confirm: false }, ...asPerson(d) });
    expect(no).toMatchObject({ status: 'denied', reason: 'refused' });
    expect(existsSync(marker)).toBe(false);
  });
});

describe('maxSessions is per scope', () => {
  it('refuses a running session over the limit as limit, counting each scope on its own', async () => {
    const d2 = await startDaemon({ env: { PROCCTL_MAX_SESSIONS: '2', PROCCTL_KILL_GRACE_MS: '1000' } });
    const c3 = await d2.client();
    const a = new Scoped(c3, 'a');
    const bScope = new Scoped(c3, 'b');
    const pids: number[] = [];
    try {
      for (const s of [a, a, bScope, bScope]) pids.push((await s.exec({ command: 'sleep 600', background: true })).pid);
      const e = await a.error('exec', { command: 'echo third' });
      expect(e.data.kind).toBe('limit');
      expect(await a.list()).toHaveLength(2);
      // Finished sessions do not count.
      await a.process({ action: 'kill', sessionId: (await a.list())[0].sessionId });
      const r = await a.exec({ command: 'echo room-again' });
      expect(r.output).toBe('room-again\n');
    } finally {
      c3.close();
      expect(await d2.stop()).toBe(0);
    }
    for (const pid of pids) expect(alive(pid)).toBe(false);
  });
});
