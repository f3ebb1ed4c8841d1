import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers, spawnProcctld, stopRawDaemons } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes, sharedDaemon, within } from '../helpers/session.js';
import { logLines, makeStateDir, readRecords, removeStateDirs } from '../helpers/state.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

/** Where commands that must never run would leave a mark. */
const marks = mkdtempSync(join(tmpdir(), 'procctl-approvals-'));
const mark = (name: string) => join(marks, name);

const RULES = [
  { match: '^echo allowed-first', action: 'allow' },
  { match: 'forbidden', action: 'deny', reason: 'forbidden things are not run here' },
  { match: '^(a+)+$', action: 'deny', reason: 'only a' },
  { match: 'needs-ok', action: 'ask', reason: 'touches production' },
  { match: 'locked-only', action: 'deny', reason: 'not in the locked scope', scopes: ['locked'] },
  { match: 'plain-ask', action: 'ask' },
];

sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' }, config: { approvals: { rules: RULES } } }, (x) => ({ d, c, scopes } = x));

const started = new Set<number>();
// The shared daemon is stopped (and checked) by sharedDaemon; this cleans up after the others.
afterAll(async () => {
  await stopRawDaemons();
  killLeftovers(started);
  removeStateDirs();
  rmSync(marks, { recursive: true, force: true });
});

/** An exec that a rule asks about: it must answer approval_required. */
async function asked(s: Scoped, p: Record<string, unknown>): Promise<any> {
  const r = await s.exec(p);
  expect(r.status, JSON.stringify(r).slice(0, 400)).toBe('approval_required');
  return r;
}

const listed = async (s: Scoped, id: string) => (await s.list()).find((x) => x.sessionId === id);

describe('rules', () => {
  it('no match: the command runs', async () => {
    const s = scopes.next('none');
    const r = await s.exec({ command: 'echo hello' });
    expect(r).toMatchObject({ status: 'completed', exitCode: 0, output: 'hello\n' });
  });

  it('allow: the first match wins, even over a deny that also matches', async () => {
    const s = scopes.next('allow');
    const r = await s.exec({ command: 'echo allowed-first forbidden' });
    expect(r).toMatchObject({ status: 'completed', output: 'allowed-first forbidden\n' });
  });

  it('deny: nothing runs; the answer is denied with the rule reason, and list keeps a denied session', async () => {
    const s = scopes.next('deny');
    const r = await s.exec({ command: `touch ${mark('denied')}; echo forbidden` });
    expect(r.status).toBe('denied');
    expect(r.reason).toBe('rule');
    expect(r.text).toContain('forbidden things are not run here');
    expect(typeof r.sessionId).toBe('string');
    expect(existsSync(mark('denied'))).toBe(false);
    const rec = await listed(s, r.sessionId);
    expect(rec).toMatchObject({ status: 'denied', reason: 'rule', pid: null });
    expect(rec.interrupt).toBeUndefined();
    // It never ran, so it cannot be answered, fed or signalled.
    expect((await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true } })).data.kind).toBe('conflict');
    expect((await s.error('process', { action: 'write', sessionId: r.sessionId, data: 'x' })).data.kind).toBe('conflict');
    const polled = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(polled).toMatchObject({ status: 'denied', reason: 'rule' });
    expect(polled.text).toContain('Nothing ran');
    await s.process({ action: 'clear', sessionId: r.sessionId });
  });

  it('a rule limited by scopes applies in those scopes only', async () => {
    const locked = new Scoped(c, 'locked');
    const other = scopes.next('open');
    const denied = await locked.exec({ command: 'echo locked-only' });
    expect(denied).toMatchObject({ status: 'denied', reason: 'rule' });
    expect(denied.text).toContain('not in the locked scope');
    const ran = await other.exec({ command: 'echo locked-only' });
    expect(ran).toMatchObject({ status: 'completed', output: 'locked-only\n' });
    await locked.process({ action: 'clear', sessionId: denied.sessionId });
  });

  it('a catastrophic pattern against a long command answers (matching is linear)', async () => {
    const s = scopes.next('redos');
    // ^(a+)+$ takes exponential time in a backtracking engine on a's followed by something else.
    const command = `${'a'.repeat(50_000)}! 2>/dev/null; echo answered`;
    const r = await within(s.exec({ command }), 30_000, 'exec with a catastrophic pattern');
    expect(r).toMatchObject({ status: 'completed', exitCode: 0, output: 'answered\n' });
    // And a command the pattern does match is denied.
    expect((await s.exec({ command: 'a'.repeat(10_000) })).status).toBe('denied');
  });
});

describe('ask', () => {
  it('exec answers approval_required with the approval interrupt; list, poll and an event show it', async () => {
    const s = scopes.next('ask');
    const listener = await d.client();
    try {
      const l = new Scoped(listener, s.scope);
      await l.request('subscribe', { events: ['approval_required', 'started', 'exited'] });
      const r = await asked(s, { command: `echo needs-ok > ${mark('asked')}` });
      expect(Object.keys(r.interrupt).sort()).toEqual(['createdAt', 'expiresAt', 'fields', 'id', 'kind', 'reason']);
      // The reason names the part that decided and its rule (SPEC §8).
      expect(r.interrupt).toMatchObject({ kind: 'approval', reason: 'echo needs-ok (rule 3: touches production)' });
      expect(r.interrupt.fields).toEqual([{ name: 'confirm', type: 'confirm', label: expect.stringContaining('needs-ok'), required: true }]);
      // approvals.timeoutSeconds defaults to 300.
      expect(Date.parse(r.interrupt.expiresAt) - Date.parse(r.interrupt.createdAt)).toBe(300_000);
      expect(r.text).toContain('resume');
      expect(existsSync(mark('asked'))).toBe(false);

      const rec = await listed(s, r.sessionId);
      expect(rec).toMatchObject({ status: 'approval_required', pid: null, command: `echo needs-ok > ${mark('asked')}` });
      expect(rec.interrupt).toEqual(r.interrupt);
      expect(rec.exitCode).toBeUndefined();

      const polled = await within(s.process({ action: 'poll', sessionId: r.sessionId, timeout: 60_000 }), 10_000, 'poll of a pending approval');
      expect(polled).toMatchObject({ status: 'approval_required', interrupt: r.interrupt });

      await listener.until(() => listener.notifications.some((n) => n.params?.type === 'approval_required' && n.params.sessionId === r.sessionId));
      const ev = listener.notifications.find((n) => n.params?.type === 'approval_required' && n.params.sessionId === r.sessionId).params;
      expect(ev.interrupt).toEqual(r.interrupt);
      expect(listener.notifications.some((n) => n.params?.type === 'started' && n.params.sessionId === r.sessionId)).toBe(false);

      // Nothing to type into, nothing to signal: it has not started.
      expect((await s.error('process', { action: 'write', sessionId: r.sessionId, data: 'x' })).data.kind).toBe('conflict');
      expect((await s.error('process', { action: 'signal', sessionId: r.sessionId, signal: 'SIGINT' })).data.kind).toBe('conflict');
      expect((await s.error('process', { action: 'clear', sessionId: r.sessionId })).data.kind).toBe('not_found');
      expect((await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { text: 'yes' } })).data.kind).toBe('invalid');
      await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: false }, ...asPerson(d) });
      await listener.until(() => listener.notifications.some((n) => n.params?.type === 'exited' && n.params.sessionId === r.sessionId));
      const exited = listener.notifications.find((n) => n.params?.type === 'exited' && n.params.sessionId === r.sessionId).params;
      expect(exited).toMatchObject({ status: 'denied', reason: 'refused' });
    } finally {
      listener.close();
    }
  });

  it('confirm: the command starts under the same id and resume answers as exec would have', async () => {
    const s = scopes.next('confirm');
    const r = await asked(s, { command: 'echo needs-ok; echo to-stderr >&2; exit 3', name: 'the job' });
    const rec0 = await listed(s, r.sessionId);
    const res = await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...asPerson(d) });
    expect(res).toMatchObject({ status: 'completed', sessionId: r.sessionId, name: 'the job', exitCode: 3, output: 'needs-ok\nto-stderr\n' });
    expect(res.text).toContain('(Command exited with code 3)');
    const rec = await listed(s, r.sessionId);
    expect(rec).toMatchObject({ status: 'completed', exitCode: 3 });
    expect(rec.pastInterrupts).toEqual([expect.objectContaining({ id: r.interrupt.id, kind: 'approval', outcome: 'answered' })]);
    expect(rec0.pid).toBeNull();
    // Exactly once.
    const again = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
    expect(again.data.kind).toBe('conflict');
    expect((await s.list()).filter((x) => x.sessionId === r.sessionId)).toHaveLength(1);
  });

  it('confirm honours the exec own background:true: running at once', async () => {
    const s = scopes.next('bg');
    const r = await asked(s, { command: 'echo needs-ok; sleep 30', background: true });
    const res = await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...asPerson(d) });
    started.add(res.pid);
    expect(res).toMatchObject({ status: 'running', sessionId: r.sessionId });
    expect(typeof res.pid).toBe('number');
    await s.waitOutput(r.sessionId, 'needs-ok');
    const killed = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(killed).toMatchObject({ status: 'failed', reason: 'user' });
  });

  it('confirm honours the exec own short yieldMs: running at the yield, then it ends by itself', async () => {
    const s = scopes.next('yield');
    const r = await asked(s, { command: 'sleep 2; echo needs-ok done', yieldMs: 100 });
    const res = await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...asPerson(d) });
    started.add(res.pid);
    expect(res.status).toBe('running');
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(output).toContain('needs-ok done');
  });

  it('refuse: denied with reason refused, nothing ran, and a second answer is a conflict', async () => {
    const s = scopes.next('refuse');
    const r = await asked(s, { command: `touch ${mark('refused')}; echo needs-ok` });
    const res = await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: false }, ...asPerson(d) });
    expect(res).toMatchObject({ status: 'denied', sessionId: r.sessionId, reason: 'refused', interruptId: r.interrupt.id });
    expect(res.text).toContain('refused');
    expect(existsSync(mark('refused'))).toBe(false);
    const rec = await listed(s, r.sessionId);
    expect(rec).toMatchObject({ status: 'denied', reason: 'refused' });
    expect(rec.interrupt).toBeUndefined();
    expect(rec.pastInterrupts).toEqual([expect.objectContaining({ id: r.interrupt.id, kind: 'approval', outcome: 'answered' })]);
    const again = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
    expect(again.data.kind).toBe('conflict');
    expect(existsSync(mark('refused'))).toBe(false);
  });

  it('without a reason in the rule, the reason names the rule', async () => {
    const s = scopes.next('noreason');
    const r = await asked(s, { command: 'echo plain-ask' });
    expect(r.interrupt.reason).toBe('echo plain-ask (rule 5)');
    await s.process({ action: 'remove', sessionId: r.sessionId });
  });

  it('kill withdraws a pending approval (denied, reason user); remove also forgets it', async () => {
    const s = scopes.next('withdraw');
    const a = await asked(s, { command: `touch ${mark('killed')}; echo needs-ok` });
    const killed = await s.process({ action: 'kill', sessionId: a.sessionId });
    expect(killed).toMatchObject({ sessionId: a.sessionId, status: 'denied', reason: 'user' });
    expect((await listed(s, a.sessionId)).status).toBe('denied');
    const b = await asked(s, { command: `touch ${mark('removed')}; echo needs-ok` });
    const removed = await s.process({ action: 'remove', sessionId: b.sessionId });
    expect(removed).toMatchObject({ sessionId: b.sessionId, status: 'denied', reason: 'user' });
    expect(removed.text).toContain('Forgot session');
    expect(await listed(s, b.sessionId)).toBeUndefined();
    // kill {all} stops running sessions; a pending approval is left to be answered.
    const c2 = await asked(s, { command: 'echo needs-ok' });
    const all = await s.process({ action: 'kill', all: true });
    expect(all.sessions).toEqual([]);
    expect((await listed(s, c2.sessionId)).status).toBe('approval_required');
    await s.process({ action: 'remove', sessionId: c2.sessionId });
    expect(existsSync(mark('killed'))).toBe(false);
    expect(existsSync(mark('removed'))).toBe(false);
  });

  it('another scope sees nothing of a pending approval and cannot answer it', async () => {
    const s = scopes.next('mine');
    const other = scopes.next('theirs');
    const r = await asked(s, { command: 'echo needs-ok' });
    const err = await other.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
    expect(err.data.kind).toBe('not_found');
    await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: false }, ...asPerson(d) });
  });
});

describe('expiry', () => {
  it('unanswered within approvals.timeoutSeconds: denied with reason expired; a late answer is a conflict', async () => {
    const fast = await startDaemon({ config: { approvals: { timeoutSeconds: 1, rules: [{ match: 'needs-ok', action: 'ask' }] } } });
    const fc = await fast.client();
    try {
      const s = new Scoped(fc, 'expiry');
      await s.request('subscribe', { events: ['exited'] });
      const r = await asked(s, { command: `touch ${mark('expired')}; echo needs-ok` });
      expect(Date.parse(r.interrupt.expiresAt) - Date.parse(r.interrupt.createdAt)).toBe(1000);
      const rec = await waitFor(
        async () => {
          const x = await listed(s, r.sessionId);
          return x.status === 'denied' ? x : undefined;
        },
        { what: 'the approval to expire' },
      );
      expect(rec.reason).toBe('expired');
      expect(rec.pastInterrupts).toEqual([expect.objectContaining({ id: r.interrupt.id, outcome: 'expired' })]);
      await fc.until(() => fc.notifications.some((n) => n.params?.type === 'exited' && n.params.sessionId === r.sessionId));
      const err = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
      expect(err.data.kind).toBe('conflict');
      expect(existsSync(mark('expired'))).toBe(false);
    } finally {
      fc.close();
      await fast.stop();
    }
  });
});

describe('a restart', () => {
  const CONFIG = { approvals: { rules: [{ match: 'needs-ok', action: 'ask', reason: 'touches production' }] } };

  it('a pending approval survives SIGKILL of the daemon: still pending, listed, and answerable', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env, config: CONFIG });
    const s1 = new Scoped(await d1.client(), 'crash');
    const r = await asked(s1, { command: 'echo needs-ok after the crash', yieldMs: 30_000 });
    const kept = await asked(s1, { command: `touch ${mark('refused-after')}; echo needs-ok` });
    d1.proc.kill('SIGKILL');
    await within(new Promise((res) => d1.proc.once('exit', res)), 20_000, 'the daemon to die');
    expect(readRecords(state).get(r.sessionId)).toMatchObject({ status: 'approval_required' });

    const d2 = await startDaemon({ env, config: CONFIG });
    const s2 = new Scoped(await d2.client(), 'crash');
    const rec = await listed(s2, r.sessionId);
    expect(rec).toMatchObject({ status: 'approval_required', interrupt: r.interrupt });
    const res = await s2.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...asPerson(d2) });
    expect(res).toMatchObject({ status: 'completed', sessionId: r.sessionId, exitCode: 0, output: 'needs-ok after the crash\n' });
    const refused = await s2.process({ action: 'resume', sessionId: kept.sessionId, input: { confirm: false }, ...asPerson(d2) });
    expect(refused).toMatchObject({ status: 'denied', reason: 'refused' });
    expect(existsSync(mark('refused-after'))).toBe(false);
    await d1.stop();
    expect(await d2.stop()).toBe(0);
  });

  it('a graceful shutdown does not deny a pending approval; its expiry counts from when it was asked', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env, config: { approvals: { timeoutSeconds: 4, rules: CONFIG.approvals.rules } } });
    const s1 = new Scoped(await d1.client(), 'term');
    const r = await asked(s1, { command: 'echo needs-ok' });
    expect(await d1.stop()).toBe(0);
    expect(readRecords(state).get(r.sessionId)).toMatchObject({ status: 'approval_required' });

    const d2 = await startDaemon({ env, config: { approvals: { timeoutSeconds: 300, rules: CONFIG.approvals.rules } } });
    const s2 = new Scoped(await d2.client(), 'term');
    // Asked under a 4 s timeout: it expires then, whatever the new config says.
    const rec = await waitFor(
      async () => {
        const x = await listed(s2, r.sessionId);
        return x.status === 'denied' ? x : undefined;
      },
      { what: 'the restored approval to expire' },
    );
    expect(rec.reason).toBe('expired');
    expect(Date.parse(rec.endedAt)).toBeGreaterThanOrEqual(Date.parse(r.interrupt.expiresAt));
    expect(await d2.stop()).toBe(0);
  });
});

describe('the config', () => {
  it('an invalid pattern is refused at start, naming the rule by its position and pattern', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-badrule-'));
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ approvals: { rules: [{ match: 'ok', action: 'allow' }, { match: '(?=lookahead)', action: 'deny' }] } }));
    const raw = spawnProcctld(['--socket', join(dir, 'sock'), '--config', file], { XDG_CONFIG_HOME: join(dir, 'xdg'), PROCCTL_STATE_DIR: join(dir, 'state') });
    const code = await within(raw.exited, 20_000, 'procctld to exit');
    expect(code).toBe(2);
    expect(raw.stderr()).toContain('approvals.rules.1.match');
    expect(raw.stderr()).toContain('approval rule 1');
    expect(raw.stderr()).toContain('(?=lookahead)');
  });

  it('SIGHUP: new rules apply to new execs; a pending approval keeps the decision it was made under', async () => {
    const rd = await startDaemon({ env: { PROCCTL_LOG_LEVEL: 'info' }, config: { approvals: { rules: [{ match: 'deploy', action: 'ask' }] } } });
    const s = new Scoped(await rd.client(), 'reload');
    const pending = await asked(s, { command: 'echo deploy one' });
    writeFileSync(join(rd.dir, 'config.json'), JSON.stringify({ approvals: { rules: [{ match: 'deploy', action: 'deny', reason: 'frozen' }] } }));
    const reloads = () => logLines(rd.stdout()).filter((l) => /config reloaded/.test(l.msg)).length;
    rd.proc.kill('SIGHUP');
    await waitFor(() => reloads() > 0, { what: 'the reload' });
    const now = await s.exec({ command: 'echo deploy two' });
    expect(now).toMatchObject({ status: 'denied', reason: 'rule' });
    expect(now.text).toContain('frozen');
    // A line judged before the reload (it asked then) is judged again under the new rules, not given its kept judgement.
    expect(await s.exec({ command: 'echo deploy one' })).toMatchObject({ status: 'denied', reason: 'rule' });
    const res = await s.process({ action: 'resume', sessionId: pending.sessionId, input: { confirm: true }, ...asPerson(rd) });
    expect(res).toMatchObject({ status: 'completed', output: 'deploy one\n' });
    expect(await rd.stop()).toBe(0);
  });
});
