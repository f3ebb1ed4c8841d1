import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { asPerson, PROCCTL, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { makeStateDir, removeStateDirs } from '../helpers/state.js';
import { cli } from '../cli/run.js';

/**
 * Who answers an approval (SPEC §8), tried as the agent would: its own `resume` over the socket,
 * and `procctl resume --yes` run through exec from inside a session (which can read the
 * credential file, being the same user), each next to a person's answer that works.
 */

const marks = mkdtempSync(join(tmpdir(), 'procctl-approvers-'));
const mark = (name: string) => join(marks, name);
const RULES = [{ match: 'needs-ok', action: 'ask', reason: 'touches production' }];

afterAll(() => {
  removeStateDirs();
  rmSync(marks, { recursive: true, force: true });
});

const credential = (d: TestDaemon) => asPerson(d).approverToken;

async function asked(s: Scoped, command: string): Promise<any> {
  const r = await s.exec({ command });
  expect(r.status, JSON.stringify(r).slice(0, 300)).toBe('approval_required');
  return r;
}

async function withDaemon(config: unknown, fn: (d: TestDaemon) => Promise<void>, env: Record<string, string> = {}): Promise<void> {
  const d = await startDaemon({ config, env });
  try {
    await fn(d);
  } finally {
    await d.stop();
  }
}

describe('only a person answers an approval', () => {
  it('the agent that asked cannot approve: its resume is forbidden, names what the person runs, and nothing runs', () =>
    withDaemon({ approvals: { rules: RULES } }, async (d) => {
      const s = new Scoped(await d.client(), 'agent');
      const r = await asked(s, `touch ${mark('self')}; echo needs-ok`);
      // The model is told to wait for a person, not how to approve itself.
      expect(r.text).not.toMatch(/confirm:\s*true|action:\s*"resume"/);
      expect(r.text).toContain(`procctl --scope agent resume ${r.sessionId} --yes`);
      for (const confirm of [true, false]) {
        const err = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm } });
        expect(err.data.kind).toBe('forbidden');
        expect(err.message).toContain('answered by a person');
        expect(err.message).toContain(`procctl --scope agent resume ${r.sessionId} --yes`);
      }
      // A wrong credential is no credential.
      const wrong = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true }, approverToken: 'guess' });
      expect(wrong.data.kind).toBe('forbidden');
      expect((await s.list()).find((x) => x.sessionId === r.sessionId)?.status).toBe('approval_required');
      expect(existsSync(mark('self'))).toBe(false);
      // The person's credential works.
      const ok = await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true }, approverToken: credential(d) });
      expect(ok).toMatchObject({ status: 'completed', output: 'needs-ok\n' });
      expect(existsSync(mark('self'))).toBe(true);
    }));

  it('procctl resume run from inside a session is refused, with the credential file readable and with its environment wiped', () =>
    withDaemon({ approvals: { rules: RULES } }, async (d) => {
      const s = new Scoped(await d.client(), 'inside');
      const r = await asked(s, `touch ${mark('inside')}; echo needs-ok`);
      const procctl = `${process.execPath} ${PROCCTL}`;
      // As written, the job's procctl finds the socket and the credential beside it: the daemon still refuses.
      const plain = await s.exec({ command: `${procctl} resume ${r.sessionId} --yes; echo "exit=$?"` });
      expect(plain.output).toContain('cannot be answered from inside a session');
      expect(plain.output).toContain('exit=');
      // Without the marker in its environment, it is still a process of the session's group.
      const wiped = await s.exec({
        command: `env -i PATH="$PATH" PROCCTL_APPROVER_TOKEN="$(cat "$PROCCTL_SOCKET.approver")" ${procctl} --socket "$PROCCTL_SOCKET" --scope inside resume ${r.sessionId} --yes; echo "exit=$?"`,
      });
      expect(wiped.output).toContain('cannot be answered from inside a session');
      expect((await s.list()).find((x) => x.sessionId === r.sessionId)?.status).toBe('approval_required');
      expect(existsSync(mark('inside'))).toBe(false);
      // The same command run by a person outside any session works.
      const person = await cli(['--socket', d.socket, '--scope', 'inside', 'resume', r.sessionId, '--yes']);
      expect(person.stdout).toBe('needs-ok\n');
      expect(existsSync(mark('inside'))).toBe(true);
    }));

  it("a person's CLI answer works across a restart (the new start's credential)", async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env, config: { approvals: { rules: RULES } } });
    const r = await asked(new Scoped(await d1.client(), 'restart'), `touch ${mark('restart')}; echo needs-ok after restart`);
    const first = credential(d1);
    d1.proc.kill('SIGKILL');
    await new Promise((res) => d1.proc.once('exit', res));
    const d2 = await startDaemon({ env, config: { approvals: { rules: RULES } } });
    try {
      expect(credential(d2)).not.toBe(first);
      const s2 = new Scoped(await d2.client(), 'restart');
      const stale = await s2.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true }, approverToken: first });
      expect(stale.data.kind).toBe('forbidden');
      const person = await cli(['--socket', d2.socket, '--scope', 'restart', 'resume', r.sessionId, '--yes']);
      expect(person.stdout).toBe('needs-ok after restart\n');
      expect(existsSync(mark('restart'))).toBe(true);
    } finally {
      await d1.stop();
      await d2.stop();
    }
  });

  it('the daemon-made credential is 0600 beside the socket and gone after a shutdown', async () => {
    const d = await startDaemon({ config: { approvals: { rules: RULES } } });
    const file = `${d.socket}.approver`;
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(await d.stop()).toBe(0);
    expect(existsSync(file)).toBe(false);
  });

  it('approvals.approverToken replaces the made credential; the adminToken answers too', () =>
    withDaemon(
      { approvals: { rules: RULES, approverToken: 'person-secret' }, adminToken: 'admin-secret' },
      async (d) => {
        expect(existsSync(`${d.socket}.approver`)).toBe(false);
        const s = new Scoped(await d.client(), 'configured');
        const a = await asked(s, 'echo needs-ok one');
        expect((await s.error('process', { action: 'resume', sessionId: a.sessionId, input: { confirm: true } })).data.kind).toBe('forbidden');
        expect(await s.process({ action: 'resume', sessionId: a.sessionId, input: { confirm: true }, approverToken: 'person-secret' })).toMatchObject({ status: 'completed' });
        const b = await asked(s, 'echo needs-ok two');
        expect(await s.process({ action: 'resume', sessionId: b.sessionId, input: { confirm: true }, approverToken: 'admin-secret' })).toMatchObject({ status: 'completed' });
        // The CLI sends $PROCCTL_APPROVER_TOKEN when the daemon made none.
        const c2 = await asked(s, 'echo needs-ok three');
        const viaEnv = await cli(['--socket', d.socket, '--scope', 'configured', 'resume', c2.sessionId, '--yes'], { env: { PROCCTL_APPROVER_TOKEN: 'person-secret' } });
        expect(viaEnv.stdout).toBe('needs-ok three\n');
      },
    ));

  it('scopes.NAME.selfApprove lets that scope answer its own approvals; others still cannot', () =>
    withDaemon({ approvals: { rules: RULES }, scopes: { trusted: { selfApprove: true } } }, async (d) => {
      const c = await d.client();
      const trusted = new Scoped(c, 'trusted');
      const t = await asked(trusted, 'echo needs-ok trusted');
      expect(await trusted.process({ action: 'resume', sessionId: t.sessionId, input: { confirm: true } })).toMatchObject({ status: 'completed' });
      const other = new Scoped(c, 'untrusted');
      const u = await asked(other, 'echo needs-ok untrusted');
      expect((await other.error('process', { action: 'resume', sessionId: u.sessionId, input: { confirm: true } })).data.kind).toBe('forbidden');
    }));
});

describe('remembered answers', () => {
  const rules = [
    { command: ['echo', 'deploy'], action: 'ask', reason: 'deploys' },
    { match: 'deploy --prod', action: 'deny', reason: 'never to production from here' },
  ];

  it("a person's yes --remember prefix allows the command's name and first word in that scope, across a restart, never over a deny; procctl rules lists it, rules rm forgets it", async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env, config: { approvals: { rules } } });
    const s1 = new Scoped(await d1.client(), 'rem');
    const first = await asked(s1, 'echo deploy one');
    const yes = await cli(['--socket', d1.socket, '--scope', 'rem', 'resume', first.sessionId, '--yes', '--remember', 'prefix']);
    expect(yes.stdout).toBe('deploy one\n');
    expect(await s1.exec({ command: 'echo deploy two' })).toMatchObject({ status: 'completed', output: 'deploy two\n' });
    // Not in another scope, and never over a configured deny.
    await asked(new Scoped(s1.c, 'elsewhere'), 'echo deploy two');
    expect(await s1.exec({ command: 'echo deploy --prod' })).toMatchObject({ status: 'denied' });
    // The agent cannot forget it, nor is a remembered answer made by its own resume.
    expect((await s1.error('rules.remove', { n: 1 })).data.kind).toBe('forbidden');
    await d1.stop();

    const d2 = await startDaemon({ env, config: { approvals: { rules } } });
    try {
      const s2 = new Scoped(await d2.client(), 'rem');
      expect(await s2.exec({ command: 'echo deploy three' })).toMatchObject({ status: 'completed' });
      const listed = await cli(['--socket', d2.socket, 'rules']);
      expect(listed.stdout).toContain('1. allow prefix "echo deploy" in scope rem');
      expect(listed.stdout).toContain('rule 1: deny match');
      expect((await cli(['--socket', d2.socket, 'rules', 'rm', '1'])).stdout).toContain('Forgot remembered answer 1');
      await asked(s2, 'echo deploy four');
      // The very line the forgotten answer allowed a moment ago asks again: its kept judgement went with the answer.
      await asked(s2, 'echo deploy three');
    } finally {
      await d2.stop();
    }
  });

  it('--remember command keeps exactly that command; a yes without remember keeps nothing', () =>
    withDaemon({ approvals: { rules } }, async (d) => {
      const s = new Scoped(await d.client(), 'exact');
      const a = await asked(s, 'echo deploy x');
      expect(await s.process({ action: 'resume', sessionId: a.sessionId, input: { confirm: true, remember: 'command' }, ...asPerson(d) })).toMatchObject({ status: 'completed' });
      expect(await s.exec({ command: 'echo deploy x' })).toMatchObject({ status: 'completed' });
      await asked(s, 'echo deploy y');
      const b = await asked(s, 'echo deploy z');
      await s.process({ action: 'resume', sessionId: b.sessionId, input: { confirm: true }, ...asPerson(d) });
      await asked(s, 'echo deploy z');
      // remember goes with a yes only; the approval stays pending.
      const c = await asked(s, 'echo deploy w');
      const bad = await s.error('process', { action: 'resume', sessionId: c.sessionId, input: { confirm: false, remember: 'prefix' }, ...asPerson(d) });
      expect(bad.data.kind).toBe('invalid');
      expect((await s.list()).find((x) => x.sessionId === c.sessionId)?.status).toBe('approval_required');
    }));
});

describe('procctl approvals', () => {
  it('lists, to a person, what waits in every scope; an agent without the credential sees none; a selfApprove scope sees its own', () =>
    withDaemon({ approvals: { rules: RULES }, scopes: { trusted: { selfApprove: true } } }, async (d) => {
      const c = await d.client();
      const a = await asked(new Scoped(c, 'alpha'), 'echo needs-ok alpha');
      const b = await asked(new Scoped(c, 'beta'), 'echo needs-ok beta');
      const t = await asked(new Scoped(c, 'trusted'), 'echo needs-ok trusted');
      const person = await cli(['--socket', d.socket, '--json', 'approvals']);
      const listed = JSON.parse(person.stdout).approvals.map((x: any) => [x.sessionId, x.scope]);
      expect(listed).toEqual([
        [a.sessionId, 'alpha'],
        [b.sessionId, 'beta'],
        [t.sessionId, 'trusted'],
      ]);
      const text = await cli(['--socket', d.socket, 'approvals']);
      // The hint reaches this daemon as the command did (--socket) and names the session's scope.
      expect(text.stdout).toContain(`procctl --socket ${d.socket} --scope beta resume ${b.sessionId} --yes`);
      const agent = (await new Scoped(c, 'alpha').request('approvals.list')).result;
      expect(agent.approvals).toEqual([]);
      expect(agent.text).toContain('approver credential');
      const own = (await new Scoped(c, 'trusted').request('approvals.list')).result;
      expect(own.approvals.map((x: any) => x.sessionId)).toEqual([t.sessionId]);
    }));
});

describe('strictScopes', () => {
  it('refuses a scope the config does not list, so an agent cannot leave its rules by naming another', () =>
    withDaemon({ strictScopes: true, scopes: { ci: { token: 'ci-secret' } } }, async (d) => {
      const c = await d.client();
      for (const scope of ['default', 'other']) {
        const err = await new Scoped(c, scope).error('exec', { command: `touch ${mark(`strict-${scope}`)}` });
        expect(err.data.kind).toBe('forbidden');
        expect(err.message).toContain('strictScopes');
        expect(err.message).toContain('"ci"');
        expect(existsSync(mark(`strict-${scope}`))).toBe(false);
      }
      expect(await new Scoped(c, 'ci', 'ci-secret').exec({ command: 'echo listed' })).toMatchObject({ status: 'completed', output: 'listed\n' });
    }));

  it('without it, an unlisted scope is isolated by name as before', () =>
    withDaemon({}, async (d) => {
      expect(await new Scoped(await d.client(), 'anything').exec({ command: 'echo open' })).toMatchObject({ status: 'completed' });
    }));
});
