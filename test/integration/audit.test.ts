import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { makeStateDir, removeStateDirs } from '../helpers/state.js';
import { writeSynthetic } from '../../bench/lib/trail.js';
import type { TestClient } from '../helpers/rpc.js';
import { cli } from '../cli/run.js';

// The audit trail, history and verify through a real daemon (SPEC §18).
const ADMIN = 'audit-test-admin-token';
const RULES = [
  { match: 'audit-deny', action: 'deny', reason: 'not here' },
  { match: 'audit-ask', action: 'ask', reason: 'a person decides' },
];
const OP = { scope: '*', token: ADMIN };

let d: TestDaemon;
let c: TestClient;
beforeAll(async () => {
  d = await startDaemon({ config: { adminToken: ADMIN, approvals: { rules: RULES }, scopes: { trusted: { selfApprove: true } } } });
  c = await d.client();
});
afterAll(async () => {
  c?.close();
  await d?.stop();
});

const trailFile = () => join(d.env.PROCCTL_STATE_DIR!, 'audit', 'audit-1.jsonl');

/** `procctl ARGS` against the test daemon, its exit status and output. */
const procctl = (args: string[], env: Record<string, string> = {}) => cli(['--socket', d.socket, ...args], { env });

describe('the audit trail through the daemon', () => {
  it("records a session (who asked: the peer's uid, pid and executable; what, where, how confined) and its end, found after clear", async () => {
    const r = await c.exec({ scope: 'hist', command: 'echo hello', voice: 'cli' });
    expect(r.status).toBe('completed');
    await c.process({ scope: 'hist', action: 'clear', sessionId: r.sessionId });
    const h = await c.call('history', { scope: 'hist', sessionId: r.sessionId });
    expect(h.sessions).toHaveLength(1);
    expect(h.sessions[0]).toMatchObject({
      sessionId: r.sessionId,
      scope: 'hist',
      command: 'echo hello',
      status: 'completed',
      client: { kind: 'cli' },
      peer: { uid: process.getuid!(), pid: process.pid, exe: realpathSync(process.execPath) },
      sandbox: 'off',
      changes: 'direct',
      end: { status: 'completed', exit: 0, signal: null, outputBytes: 6 },
    });
    // The rules judged it (this daemon has rules): the decision is on record, allow included.
    expect(h.records.map((x: { type: string }) => x.type)).toEqual(['session', 'decision', 'end']);
    expect(h.sessions[0].decision).toMatchObject({ action: 'allow', rule: null, part: 'echo hello' });
  });

  it('a denial names the rule; an approval names who answered, between the decision and the end', async () => {
    const denied = await c.exec({ scope: 'hist', command: 'echo audit-deny' });
    expect(denied.status).toBe('denied');
    const dh = await c.call('history', { scope: 'hist', sessionId: denied.sessionId });
    expect(dh.sessions[0]).toMatchObject({ status: 'denied', decision: { action: 'deny', rule: 0, reason: 'not here' }, end: { status: 'denied', reason: 'rule' } });

    const asked = await c.exec({ scope: 'hist', command: 'echo audit-ask' });
    expect(asked.status).toBe('approval_required');
    const ran = await c.process({ scope: 'hist', action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, ...asPerson(d) });
    expect(ran.status).toBe('completed');
    const ah = await c.call('history', { scope: 'hist', sessionId: asked.sessionId });
    expect(ah.records.map((x: { type: string }) => x.type)).toEqual(['session', 'decision', 'answer', 'end']);
    expect(ah.sessions[0]).toMatchObject({ status: 'completed', decision: { action: 'ask', rule: 1 }, answers: [{ kind: 'approval', answer: 'approve', by: 'approver' }] });
  });

  it('an answer names its credential: the adminToken, MCP elicitation, a selfApprove scope; a bad client param is refused', async () => {
    const answer = async (scope: string, extra: Record<string, unknown>) => {
      const asked = await c.exec({ scope, command: 'echo audit-ask by' });
      expect(asked.status).toBe('approval_required');
      await c.process({ scope, action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, ...extra });
      return (await c.call('history', { scope, sessionId: asked.sessionId })).sessions[0].answers[0].by;
    };
    expect(await answer('who', { approverToken: ADMIN })).toBe('admin');
    expect(await answer('who', { ...asPerson(d), client: { kind: 'mcp', name: 'some-client' } })).toBe('elicitation');
    expect(await answer('trusted', {})).toBe('selfApprove');
    const mcp = await c.exec({ scope: 'who', command: 'echo from-mcp', client: { kind: 'mcp', name: 'some-client' } });
    expect((await c.call('history', { scope: 'who', sessionId: mcp.sessionId })).sessions[0].client).toEqual({ kind: 'mcp', name: 'some-client' });
    const bad = await c.request('exec', { scope: 'who', command: 'true', client: { kind: 'browser' } });
    expect(bad.error?.message).toMatch(/client must be \{kind: "cli"\|"mcp"\|"console"\|"rpc"/);
  });

  it('a scope sees its own history; the operator sees every scope and may narrow to one', async () => {
    await c.exec({ scope: 'other', command: 'echo other-scope' });
    const own = await c.call('history', { scope: 'other' });
    expect(own.sessions.map((s: { scope: string }) => s.scope)).toEqual(['other']);
    const all = await c.call('history', OP);
    expect(new Set(all.sessions.map((s: { scope: string }) => s.scope))).toEqual(new Set(['hist', 'other', 'who', 'trusted']));
    const narrowed = await c.call('history', { ...OP, ofScope: 'other' });
    expect(narrowed.total).toBe(1);
    const refused = await c.request('history', { scope: 'other', ofScope: 'hist' });
    expect(refused.error?.data?.kind).toBe('forbidden');
    const failed = await c.call('history', { ...OP, status: 'failed' });
    expect(failed.total).toBe(0);
    const grep = await c.call('history', { ...OP, grep: 'OTHER-scope', since: '1h' });
    expect(grep.sessions.map((s: { command: string }) => s.command)).toEqual(['echo other-scope']);
    const bad = await c.request('history', { ...OP, since: 'yesterday' });
    expect(bad.error?.message).toMatch(/since: must be an ISO 8601 time .* or how long ago/);
  });

  it('procctl history lists who asked and who allowed; history ID tells the whole story', async () => {
    const list = await procctl(['--scope', 'hist', 'history']);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/completed exit 0 {2}\[rpc, uid \d+ pid \d+ .*; approved by approver\] {2}echo audit-ask/);
    const asked = JSON.parse((await procctl(['--scope', 'hist', '--json', 'history', '--grep', 'audit-ask'])).stdout).sessions[0];
    const story = await procctl(['--scope', 'hist', 'history', asked.sessionId]);
    expect(story.code).toBe(0);
    expect(story.stdout).toMatch(/asked {5}echo audit-ask[\s\S]*decided {3}ask: echo audit-ask \(rule 1: a person decides\)[\s\S]*answered {2}approved \(approval\) by approver[\s\S]*ended {5}completed exit 0/);
    expect((await procctl(['--scope', 'hist', 'history', 'zzzzzzzz'])).code).toBe(1);
  });

  it("audit.verify is the operator's; an untouched trail verifies, an edited one does not (procctl exits 1 and names the line)", async () => {
    const refused = await c.request('audit.verify', { scope: 'hist' });
    expect(refused.error?.data?.kind).toBe('forbidden');
    const ok = await c.call('audit.verify', OP);
    expect(ok).toMatchObject({ ok: true, files: 1 });
    expect(ok.records).toBeGreaterThanOrEqual(10);
    const whole = await procctl(['audit', 'verify'], { PROCCTL_ADMIN_TOKEN: ADMIN });
    expect(whole.code, whole.stderr).toBe(0);
    expect(whole.stdout).toMatch(/The audit trail is whole: \d+ records in 1 file\./);

    const original = readFileSync(trailFile(), 'utf8');
    try {
      writeFileSync(trailFile(), original.replace('"command":"echo hello"', '"command":"echo HELLO"'));
      const bad = await c.call('audit.verify', OP);
      expect(bad).toMatchObject({ ok: false, firstBad: { file: 'audit-1.jsonl', line: 1, why: 'changed' } });
      const cliBad = await procctl(['--scope', '*', '--token', ADMIN, 'audit', 'verify']);
      expect(cliBad.code).toBe(1);
      expect(cliBad.stdout).toMatch(/NOT whole: the record at audit-1.jsonl line 1 was changed/);
      const st = await c.call('daemon.status');
      expect(st.audit).toMatchObject({ enabled: true, files: 1, writable: true, lastVerify: { ok: false, firstBad: { line: 1, why: 'changed' } } });
      const status = await procctl(['status']);
      expect(status.stdout).toMatch(/audit: {4}\S+ in 1 file\(s\), last record #\d+; last verify .*NOT whole at audit-1.jsonl:1 \(changed\)/);
    } finally {
      writeFileSync(trailFile(), original);
    }
    expect((await c.call('audit.verify', OP)).ok).toBe(true);
  });
});

describe('audit.enabled false', () => {
  it('writes nothing, and history and verify say the trail is off', async () => {
    const off = await startDaemon({ config: { adminToken: ADMIN, audit: { enabled: false } } });
    const oc = await off.client();
    try {
      await oc.exec({ command: 'echo quiet' });
      const h = await oc.request('history', {});
      expect(h.error?.message).toMatch(/audit trail is off \(audit.enabled is false/);
      const st = await oc.call('daemon.status');
      expect(st.audit).toMatchObject({ enabled: false, files: 0 });
    } finally {
      oc.close();
      await off.stop();
    }
  });
});

describe('a long trail', () => {
  afterAll(() => removeStateDirs());

  it('audit.verify of 60,000 records runs beside the daemon: requests sent after it are answered before it, and it still verifies', async () => {
    const state = makeStateDir();
    // Records as the writer makes them (files of 32 MiB, chained), the newest a minute old.
    writeSynthetic(join(state, 'audit'), 60_000, Date.now() - 86_400_000, Date.now() - 60_000);
    const big = await startDaemon({ env: { PROCCTL_STATE_DIR: state }, config: { adminToken: ADMIN } });
    const bc = await big.client();
    try {
      const order: string[] = [];
      const verify = bc.call('audit.verify', OP).then((v) => {
        order.push('verify');
        return v;
      });
      // Sent after the verify, on the same connection: the daemon reads it while the verify runs.
      const status = bc.call('daemon.status').then(() => order.push('status'));
      const listed = bc.call('process', { action: 'list' }).then(() => order.push('list'));
      const [v] = await Promise.all([verify, status, listed]);
      expect(v).toMatchObject({ ok: true });
      expect(v.records).toBeGreaterThanOrEqual(60_000);
      expect(order.at(-1)).toBe('verify');
    } finally {
      bc.close();
      await big.stop();
    }
  });

  it('history that reads the whole trail (no since) runs beside the daemon: a client asking one request after another is answered all along', async () => {
    const state = makeStateDir();
    // 150,000 records in two files; a grep with a quote in it parses every session line it looks at.
    writeSynthetic(join(state, 'audit'), 150_000, Date.now() - 86_400_000, Date.now() - 60_000);
    const big = await startDaemon({ env: { PROCCTL_STATE_DIR: state }, config: { adminToken: ADMIN } });
    const bc = await big.client();
    const other = await big.client();
    try {
      let answered = false;
      const history = bc.call('history', { ...OP, grep: 'deploy.sh --env "staging"' }).then((h) => {
        answered = true;
        return h;
      });
      // One request at a time on another connection: on the daemon's thread the scan would hold
      // each for as long as a file's scan takes, and few would be answered before the history is.
      let meanwhile = 0;
      while (!answered) {
        await other.call('process', { action: 'list', scope: 'x' });
        if (!answered) meanwhile++;
      }
      const h = await history;
      expect(h.total).toBe(0);
      expect(h.scanned.files).toBe(2);
      // Here: about 6,000 with the scan on its own thread, about 100 with it on the daemon's (its reads alone leave gaps).
      expect(meanwhile).toBeGreaterThanOrEqual(1000);
    } finally {
      bc.close();
      other.close();
      await big.stop();
    }
  });
});

describe('across a crash', () => {
  afterAll(() => removeStateDirs());

  it("a SIGKILLed daemon's torn last line is told apart; the next start goes on after it, records the lost session's end, and the trail verifies", async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env, config: { adminToken: ADMIN } });
    const c1 = await d1.client();
    const long = await c1.exec({ command: 'sleep 300', background: true });
    expect(long.status).toBe('running');
    await c1.exec({ command: 'echo before-the-crash' });
    await c1.call('history', {});
    c1.close();
    d1.proc.kill('SIGKILL');
    await new Promise((r) => (d1.proc.exitCode !== null || d1.proc.signalCode !== null ? r(null) : d1.proc.once('exit', r)));
    // What a crash in the middle of a write leaves: the start of a line and no newline.
    const file = join(state, 'audit', 'audit-1.jsonl');
    const whole = readFileSync(file, 'utf8');
    const lines = whole.split('\n').length;
    writeFileSync(file, `${whole}{"seq":99,"time":"2026-`);

    const d2 = await startDaemon({ env, config: { adminToken: ADMIN } });
    const c2 = await d2.client();
    try {
      const v = await c2.call('audit.verify', OP);
      expect(v).toMatchObject({ ok: true, torn: [{ file: 'audit-1.jsonl', line: lines }] });
      const h = await c2.call('history', { sessionId: long.sessionId });
      expect(h.sessions[0]).toMatchObject({ status: 'failed', end: { status: 'failed', reason: 'lost' } });
      await c2.exec({ command: 'echo after-the-crash' });
      const all = await c2.call('history', {});
      expect(all.sessions.map((s: { command: string }) => s.command)).toEqual(['echo after-the-crash', 'echo before-the-crash', 'sleep 300']);
      expect((await c2.call('audit.verify', OP)).ok).toBe(true);
    } finally {
      c2.close();
      await d2.stop();
      await d1.stop();
    }
  });
});
