import { existsSync, mkdirSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, PROCCTL, startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';
import { cli } from '../cli/run.js';

/**
 * Review as an approval (SPEC §16, §8), with a real sandbox and overlay: a command a rule says
 * "review" for runs at once with its writes held, and once it ends its changes wait for a
 * person. Each way the agent could reach the workspace without that person (its own resume, its
 * own apply, procctl run from inside a session, changes "direct", elevated) is tried next to the
 * person's answer that works.
 */

const fs = scratchRoot('procctl-review-approval-');
const ws = fs.dir('ws');
const ids = new Set<string>();
const state = join(fs.root, 'state');
let d: TestDaemon;
let s: Scoped;

const config = {
  sandbox: { mode: 'workspace-write', workspaces: [ws] },
  approvals: {
    rules: [
      { command: ['touch'], action: 'review', reason: 'a person sees what it writes' },
      { match: 'ask-me', action: 'ask', reason: 'a person decides first' },
    ],
  },
  scopes: { host: { elevated: 'allow' }, trusted: { selfApprove: true } },
};

const person = () => asPerson(d);
const dirFor = (name: string) => {
  const dir = join(ws, name);
  mkdirSync(dir);
  return dir;
};

/** Run a command the rule reviews; it ends at once with its changes held and asked about. */
async function reviewed(on: Scoped, command: string, cwd: string): Promise<any> {
  const r = await on.exec({ command, workdir: cwd, yieldMs: 60_000 });
  ids.add(r.sessionId);
  expect(r.status, r.text).toBe('completed');
  expect(r.changes).toMatchObject({ state: 'pending', pending: true });
  expect(r.interrupt?.kind, r.text).toBe('changes');
  return r;
}

beforeAll(async () => {
  if (SKIP_SANDBOX) return;
  d = await startDaemon({ config, env: { PROCCTL_STATE_DIR: state } });
  s = new Scoped(await d.client(), 'agent');
});

afterAll(async () => {
  await d?.stop();
  killMarked(ids);
  fs.cleanup();
});

describe.skipIf(SKIP_SANDBOX)('review as an approval', () => {
  it('a review rule runs the command at once with its writes held; the ended session asks a person, and the agent cannot answer or apply', async () => {
    const dir = dirFor('basic');
    const r = await reviewed(s, 'touch x', dir);
    expect(existsSync(join(dir, 'x'))).toBe(false);
    expect(r.interrupt.fields).toEqual([{ name: 'confirm', type: 'confirm', label: `Apply these changes to ${ws}?`, required: true }]);
    expect(r.interrupt.reason).toContain('A basic/x');
    expect(r.interrupt.reason).toContain('1 path in');
    // The model is told to wait for a person, and how the person answers; not how to apply its own changes.
    expect(r.text).toContain(`procctl --scope agent resume ${r.sessionId} --yes`);
    expect(r.text).not.toMatch(/action:\s*"apply"|confirm:\s*true/);

    const polled = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(polled).toMatchObject({ status: 'completed', exitCode: 0, interrupt: { kind: 'changes', id: r.interrupt.id } });
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.interrupt).toMatchObject({ kind: 'changes' });

    // The agent's own answer, with no credential or a wrong one, is refused; so is its own apply.
    for (const confirm of [true, false]) {
      const own = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm } });
      expect(own.data.kind).toBe('forbidden');
      expect(own.message).toContain(`procctl --scope agent resume ${r.sessionId} --yes`);
    }
    expect((await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true }, approverToken: 'guess' })).data.kind).toBe('forbidden');
    expect((await s.error('process', { action: 'apply', sessionId: r.sessionId })).data.kind).toBe('forbidden');
    expect((await s.error('process', { action: 'apply', sessionId: r.sessionId, paths: ['basic/x'], force: true })).data.kind).toBe('forbidden');
    expect(existsSync(join(dir, 'x'))).toBe(false);

    // procctl approvals lists it for the person with its summary; without the credential, nothing.
    const mine = await cli(['--socket', d.socket, 'approvals']);
    expect(mine.stdout).toContain(`${r.sessionId} (scope agent): changes of touch x`);
    expect(mine.stdout).toContain('A basic/x');
    const agents = (await s.c.call('approvals.list', { scope: 'agent' })) as any;
    expect(agents.approvals).toEqual([]);

    // The person's answer applies them, exactly once.
    const yes = await cli(['--socket', d.socket, '--scope', 'agent', 'resume', r.sessionId, '--yes']);
    expect(yes.code, yes.stderr).toBe(0);
    expect(yes.stdout).toContain(`Applied 1 change of session ${r.sessionId}`);
    expect(existsSync(join(dir, 'x'))).toBe(true);
    const again = await s.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...person() });
    expect(again.data.kind).toBe('conflict');
    const after = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(after.interrupt).toBeUndefined();
    const done = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(done.changes).toMatchObject({ state: 'applied', pending: false });
    expect(done.pastInterrupts).toEqual([expect.objectContaining({ kind: 'changes', outcome: 'answered' })]);
  });

  it('the question lists the first 20 paths its settle read and points at the rest', async () => {
    const dir = dirFor('many');
    const r = await reviewed(s, `touch ${Array.from({ length: 25 }, (_, i) => `f${String(i).padStart(2, '0')}`).join(' ')}`, dir);
    expect(r.interrupt.reason).toContain('25 paths in');
    expect(r.interrupt.reason).toContain('A many/f00');
    expect(r.interrupt.reason).toContain('A many/f19');
    expect(r.interrupt.reason).not.toContain('many/f20');
    expect(r.interrupt.reason).toContain(`… and 5 more: \`procctl --scope agent changes ${r.sessionId}\` lists them all`);
    // Forgetting it is refused, and the refusal names the person's answer, not an apply the agent may not make.
    const kept = await s.error('process', { action: 'clear', sessionId: r.sessionId });
    expect(kept.data.kind).toBe('conflict');
    expect(kept.message).toContain('a person applies them (');
    expect(kept.message).toContain(`procctl --scope agent resume ${r.sessionId} --yes`);
    expect(kept.message).not.toMatch(/action:\s*"apply"/);
    await s.process({ action: 'discard', sessionId: r.sessionId });
  });

  it('procctl resume --no discards; the agent may discard its own held changes, never apply them', async () => {
    const dir = dirFor('refuse');
    const r = await reviewed(s, 'touch y', dir);
    const no = await cli(['--socket', d.socket, '--scope', 'agent', 'resume', r.sessionId, '--no']);
    expect(no.code, no.stderr).toBe(0);
    expect(no.stdout).toContain('Discarded the changes');
    expect(existsSync(join(dir, 'y'))).toBe(false);
    expect((await s.error('process', { action: 'apply', sessionId: r.sessionId, ...person() })).data.kind).toBe('conflict');

    const own = await reviewed(s, 'touch z', dir);
    const dropped = await s.process({ action: 'discard', sessionId: own.sessionId });
    expect(dropped.state).toBe('discarded');
    expect((await s.process({ action: 'poll', sessionId: own.sessionId })).interrupt).toBeUndefined();
    expect(existsSync(join(dir, 'z'))).toBe(false);
  });

  it("a second answer sent while the first one's apply is under way is refused as being answered, never carried out after it", async () => {
    const dir = dirFor('twice');
    // Enough files that the apply is still running on the changes' thread when the second answer is read.
    const r = await reviewed(s, 'touch $(seq 1 3000)', dir);
    // Pipelined on one connection: the daemon reads the second while the first's apply runs.
    const [yes, no] = await Promise.all([
      s.request('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...person() }),
      s.request('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: false }, ...person() }),
    ]);
    expect(yes.error, JSON.stringify(yes.error)).toBeUndefined();
    expect(yes.result.applied).toHaveLength(3000);
    expect(no.error?.data?.kind).toBe('conflict');
    expect(no.error?.message).toContain('is being answered this moment');
    expect(readdirSync(dir)).toHaveLength(3000);
    const done = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(done.changes).toMatchObject({ state: 'applied', pending: false });
    expect(done.pastInterrupts).toEqual([expect.objectContaining({ kind: 'changes', outcome: 'answered' })]);
  });

  it('procctl resume or apply run from inside a session is refused though it can read the credential; the same run by the person works', async () => {
    const dir = dirFor('inside');
    const r = await reviewed(s, 'touch w', dir);
    const host = new Scoped(s.c, 'host');
    const procctl = `${process.execPath} ${PROCCTL} --socket ${d.socket} --scope agent`;
    // An elevated job runs outside the sandbox as the same user: it finds the socket and the credential.
    for (const verb of [`resume ${r.sessionId} --yes`, `apply ${r.sessionId}`]) {
      const inside = await host.exec({ command: `${procctl} ${verb}; echo "exit=$?"`, elevated: true, yieldMs: 30_000 });
      ids.add(inside.sessionId);
      expect(inside.output, verb).toContain('cannot be answered from inside a session');
    }
    expect(existsSync(join(dir, 'w'))).toBe(false);
    const out = await cli(['--socket', d.socket, '--scope', 'agent', 'apply', r.sessionId]);
    expect(out.code, out.stderr).toBe(0);
    expect(existsSync(join(dir, 'w'))).toBe(true);
    // Applied by the person outside resume: the question is over too.
    expect((await s.process({ action: 'poll', sessionId: r.sessionId })).interrupt).toBeUndefined();
  });

  it('the agent cannot step around the rule: changes "direct" still holds them, elevated is refused', async () => {
    const dir = dirFor('around');
    const direct = await reviewed(s, 'touch d', dir);
    expect(existsSync(join(dir, 'd'))).toBe(false);
    await s.process({ action: 'discard', sessionId: direct.sessionId });
    const explicit = await s.exec({ command: 'touch e', workdir: dir, changes: 'direct' });
    ids.add(explicit.sessionId);
    expect(explicit.interrupt?.kind).toBe('changes');
    expect(existsSync(join(dir, 'e'))).toBe(false);
    const elevated = await new Scoped(s.c, 'host').error('exec', { command: 'touch f', workdir: dir, elevated: true });
    expect(elevated.data.kind).toBe('invalid');
    expect(elevated.message).toContain('review');
    expect(existsSync(join(dir, 'f'))).toBe(false);
    // What the rule does not name runs as before.
    const plain = await s.exec({ command: 'echo free > g', workdir: dir });
    expect(plain.interrupt).toBeUndefined();
    expect(readFileSync(join(dir, 'g'), 'utf8')).toBe('free\n');
  });

  it('ask and review together: ask wins, and the approved run is held for review', async () => {
    const dir = dirFor('both');
    const asked = await s.exec({ command: 'touch v; echo ask-me', workdir: dir });
    ids.add(asked.sessionId);
    expect(asked.status).toBe('approval_required');
    const check = (await s.c.call('policy.check', { scope: 'agent', command: 'touch v; echo ask-me' })) as any;
    expect(check.decision).toBe('ask');
    expect(check.text).toContain('then run in review mode');
    expect(((await s.c.call('policy.check', { scope: 'agent', command: 'touch v' })) as any).decision).toBe('review');
    const ran = await s.process({ action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, ...person() });
    expect(ran).toMatchObject({ status: 'completed', output: 'ask-me\n', interrupt: { kind: 'changes' } });
    expect(existsSync(join(dir, 'v'))).toBe(false);
    await s.process({ action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, ...person() });
    expect(existsSync(join(dir, 'v'))).toBe(true);
  });

  it('a scope with selfApprove answers its own changes approval', async () => {
    const dir = dirFor('trusted');
    const t = new Scoped(s.c, 'trusted');
    const r = await reviewed(t, 'touch t', dir);
    const own = await t.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
    expect(own.state).toBe('applied');
    expect(existsSync(join(dir, 't'))).toBe(true);
  });

  it('a changes approval survives a daemon restart and is answered after it', async () => {
    const dir = dirFor('restart');
    const r = await reviewed(s, 'touch later', dir);
    await d.stop();
    d = await startDaemon({ config, env: { PROCCTL_STATE_DIR: state } });
    s = new Scoped(await d.client(), 'agent');
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.interrupt).toMatchObject({ kind: 'changes', id: r.interrupt.id });
    expect((await s.error('process', { action: 'apply', sessionId: r.sessionId })).data.kind).toBe('forbidden');
    const yes = await cli(['--socket', d.socket, '--scope', 'agent', 'resume', r.sessionId, '--yes']);
    expect(yes.code, yes.stderr).toBe(0);
    expect(existsSync(join(dir, 'later'))).toBe(true);
  });

  it('a review job the daemon died under: after the restart its changes are pending and asked about like any other', async () => {
    const dir = dirFor('crash');
    const r = await s.exec({ command: 'touch k && echo wrote && sleep 600', workdir: dir, background: true });
    ids.add(r.sessionId);
    // A running session's changes are not shown (they may still be reshaped): its output says when k is written.
    expect((await s.error('process', { action: 'changes', sessionId: r.sessionId })).data.kind).toBe('conflict');
    await waitFor(async () => (await s.process({ action: 'log', sessionId: r.sessionId })).output.includes('wrote') || undefined, { what: 'the job to write k' });
    d.proc.kill('SIGKILL');
    await new Promise((res) => d.proc.once('exit', res));
    d = await startDaemon({ config, env: { PROCCTL_STATE_DIR: state } });
    s = new Scoped(await d.client(), 'agent');
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed).toMatchObject({ status: 'failed', reason: 'lost', changes: { pending: true }, interrupt: { kind: 'changes' } });
    expect(listed.interrupt.reason).toContain('A crash/k');
    expect((await s.error('process', { action: 'apply', sessionId: r.sessionId })).data.kind).toBe('forbidden');
    await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...person() });
    expect(existsSync(join(dir, 'k'))).toBe(true);
  });

  it('an MCP client with elicitation is asked with the summary, and its yes applies', async () => {
    const dir = dirFor('mcp');
    const transport = new StdioClientTransport({ command: process.execPath, args: [PROCCTL, '--socket', d.socket, 'mcp', '--scope', 'agent'], env: process.env as Record<string, string>, stderr: 'pipe' });
    const client = new Client({ name: 'procctl-test', version: '1.0.0' }, { capabilities: { elicitation: { form: {} } } });
    const asked: { message: string; requestedSchema: any }[] = [];
    client.setRequestHandler('elicitation/create', async (request) => {
      asked.push(request.params as { message: string; requestedSchema: any });
      return { action: 'accept', content: { confirm: true } };
    });
    await client.connect(transport);
    try {
      const r = (await client.callTool({ name: 'exec', arguments: { command: 'touch m', workdir: dir } })) as { structuredContent?: any; isError?: boolean };
      expect(asked).toHaveLength(1);
      expect(asked[0].message).toContain('A mcp/m');
      expect(asked[0].requestedSchema.properties.confirm).toMatchObject({ type: 'boolean', title: `Apply these changes to ${ws}?` });
      expect(r.isError, JSON.stringify(r)).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ state: 'applied' });
      ids.add(r.structuredContent.sessionId);
      expect(existsSync(join(dir, 'm'))).toBe(true);
    } finally {
      await client.close();
    }
  });

  it('with no workspace sandbox, a review rule refuses the exec and says why; other commands run', async () => {
    const plain = await startDaemon({ config: { approvals: { rules: [{ command: ['touch'], action: 'review' }] } } });
    try {
      const p = new Scoped(await plain.client(), 'x');
      const e = await p.error('exec', { command: `touch ${join(fs.root, 'nope')}` });
      expect(e.data.kind).toBe('invalid');
      expect(e.message).toContain('the approval rules hold this command');
      expect(e.message).toContain('sandbox.mode is "off"');
      expect(existsSync(join(fs.root, 'nope'))).toBe(false);
      expect(await p.exec({ command: 'echo fine' })).toMatchObject({ status: 'completed', output: 'fine\n' });
    } finally {
      await plain.stop();
    }
  });

  it('approvals.default "review" holds every command; unanswered, the question expires and the changes stay for a person', async () => {
    const other = fs.dir('default-ws');
    const e = await startDaemon({
      config: { sandbox: { mode: 'workspace-write', workspaces: [other] }, approvals: { default: 'review', timeoutSeconds: 1 } },
      env: { PROCCTL_STATE_DIR: join(fs.root, 'state-default') },
    });
    try {
      const a = new Scoped(await e.client(), 'agent');
      const listener = await e.client();
      await new Scoped(listener, 'agent').request('subscribe', { events: ['changes'] });
      const r = await a.exec({ command: 'echo one > one.txt', workdir: other, yieldMs: 60_000 });
      ids.add(r.sessionId);
      expect(r.interrupt?.kind, r.text).toBe('changes');
      expect(existsSync(join(other, 'one.txt'))).toBe(false);
      const expired = await waitFor(
        async () => {
          const x = (await a.list()).find((y) => y.sessionId === r.sessionId);
          return x.interrupt === undefined ? x : undefined;
        },
        { timeoutMs: 20_000, what: 'the changes approval to expire' },
      );
      expect(expired.pastInterrupts).toEqual([expect.objectContaining({ kind: 'changes', outcome: 'expired' })]);
      expect(expired.changes).toMatchObject({ state: 'pending', pending: true });
      // Whoever showed the question hears it is over: the changes, still pending, and how the question ended.
      await listener.until(() => listener.notifications.some((n) => n.params?.type === 'changes' && n.params.sessionId === r.sessionId && n.params.approval === 'expired'));
      listener.close();
      // Expired, still only a person applies them.
      expect((await a.error('process', { action: 'apply', sessionId: r.sessionId })).data.kind).toBe('forbidden');
      expect((await a.error('process', { action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...asPerson(e) })).data.kind).toBe('conflict');
      const out = await cli(['--socket', e.socket, '--scope', 'agent', 'apply', r.sessionId]);
      expect(out.code, out.stderr).toBe(0);
      expect(readFileSync(join(other, 'one.txt'), 'utf8')).toBe('one\n');
    } finally {
      await e.stop();
    }
  });
});
