import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * The sandbox tried as an attacker would (SPEC §12, "Nothing inside reaches the daemon's
 * controls"): each escape is driven from inside a real sandboxed job and must fail, next to the
 * legitimate use that must still work.
 */

/**
 * Everything outside /tmp, which the sandbox replaces with its own: the daemon's socket, state and
 * config where a user's would be (/run/user/UID, ~/.local/state), the workspace, and a place
 * outside every writable tree.
 */
const base = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), 'procctl-escape-'));
const workspace = join(base, 'workspace');
const outside = join(base, 'outside');
mkdirSync(workspace);
mkdirSync(outside);
const NODE = process.execPath;
const sessions = new Set<string>();

let d: TestDaemon;

afterAll(async () => {
  await d?.stop();
  killMarked(sessions);
  rmSync(base, { recursive: true, force: true });
});

/** A node one-liner that speaks JSON-RPC to a Unix socket and prints what it got (or why not). */
const rpc = (socket: string, method: string, params: object) =>
  `${NODE} -e 'const s=require("net").connect(process.argv[1]);s.on("error",e=>{console.log("connect-error",e.code);});s.on("connect",()=>s.write(JSON.stringify({jsonrpc:"2.0",id:1,method:process.argv[2],params:JSON.parse(process.argv[3])})+"\\n"));s.on("data",b=>{console.log(String(b).trim());s.end();})' ${JSON.stringify(socket)} ${method} '${JSON.stringify(params)}'`;

describe.skipIf(SKIP_SANDBOX)('a sandboxed job cannot reach the controls', () => {
  const scope = 'jailed';
  let s: Scoped;

  const run = async (command: string, extra: Record<string, unknown> = {}) => {
    const r = await s.exec({ command, yieldMs: 60_000, stdin: 'null', workdir: workspace, ...extra });
    sessions.add(r.sessionId);
    return r;
  };

  beforeAll(async () => {
    d = await startDaemon({
      base,
      config: {
        sandbox: { mode: 'workspace-write', workspaces: [workspace], tmpBytes: 1024 * 1024 },
        approvals: { rules: [{ match: 'needs-a-person', action: 'ask' }] },
        scopes: { [scope]: { elevated: 'allow' }, roomy: { elevated: 'allow' } },
      },
    });
    s = new Scoped(await d.client(), scope);
  });

  it("the daemon's socket is not there, so nothing can be sent to it: no exec, no elevated exec, nothing written on the host", async () => {
    const target = join(outside, 'escaped');
    const r = await run(
      [
        `test -S ${d.socket} && echo socket=reachable || echo socket=hidden`,
        rpc(d.socket, 'exec', { command: `echo x > ${target}`, workdir: '/', scope: 'roomy' }),
        rpc(d.socket, 'exec', { command: `echo x > ${target}`, elevated: true, scope }),
      ].join('; '),
    );
    expect(r.output).toContain('socket=hidden');
    expect(r.output).toContain('connect-error');
    expect(r.output).not.toContain('"result"');
    expect(existsSync(target)).toBe(false);
  });

  it('its own channel takes checkpoint for its session and refuses everything else: exec, elevated exec, answering an approval', async () => {
    const pending = await s.exec({ command: `touch ${join(workspace, 'approved')}; echo needs-a-person` });
    expect(pending.status).toBe('approval_required');
    const r = await run(
      [
        rpc('$PROCCTL_SOCKET', 'exec', { command: 'id', scope }),
        rpc('$PROCCTL_SOCKET', 'exec', { command: 'id', elevated: true, scope }),
        rpc('$PROCCTL_SOCKET', 'process', { action: 'resume', sessionId: pending.sessionId, input: { confirm: true }, scope }),
        rpc('$PROCCTL_SOCKET', 'checkpoint', { sessionId: pending.sessionId, name: 'not-mine' }),
      ].join('; '),
    );
    const answers = r.output.trim().split('\n').map((l: string) => JSON.parse(l));
    expect(answers).toHaveLength(4);
    for (const a of answers) expect(a.error?.data?.kind, JSON.stringify(a)).toBe('forbidden');
    expect((await s.list()).find((x) => x.sessionId === pending.sessionId)?.status).toBe('approval_required');
    expect(existsSync(join(workspace, 'approved'))).toBe(false);
    // A person still answers it.
    expect(await s.process({ action: 'resume', sessionId: pending.sessionId, input: { confirm: false }, ...asPerson(d) })).toMatchObject({ status: 'denied' });
  });

  it("the state directory, the approver credential and the config are empty inside; another scope's records cannot be read", async () => {
    await new Scoped(await d.client(), 'other').exec({ command: 'echo secret-of-another-scope' });
    const stateDir = join(d.dir, 'state');
    expect(readFileSync(`${d.socket}.approver`, 'utf8').length).toBeGreaterThan(10);
    const r = await run(
      [
        `ls -A ${stateDir} 2>/dev/null | wc -l`,
        `cat ${d.socket}.approver 2>/dev/null | wc -c`,
        `cat ${join(d.dir, 'config.json')} 2>/dev/null | wc -c`,
        `grep -rl secret-of-another-scope ${stateDir} 2>/dev/null | wc -l`,
      ].join('; '),
    );
    expect(r.output.trim().split('\n').map(Number)).toEqual([0, 0, 0, 0]);
  });

  it('workdir "/" (or /etc) does not make / writable: it runs read-only there and the answer says so first', async () => {
    const target = join(outside, 'via-workdir');
    const r = await run(`echo x > ${target} 2>/dev/null && echo written || echo refused`, { workdir: '/' });
    expect(r.output).toContain('refused');
    expect(r.text.split('\n')[0]).toContain('outside the workspaces');
    expect(existsSync(target)).toBe(false);
    const etc = await run('touch /etc/procctl-escaped 2>/dev/null && echo written || echo refused', { workdir: '/etc' });
    expect(etc.output).toContain('refused');
    expect(existsSync('/etc/procctl-escaped')).toBe(false);
  });

  it('a symlink out of the workspace leads to a read-only place', async () => {
    const link = join(workspace, 'link-out');
    rmSync(link, { force: true });
    symlinkSync(outside, link);
    const r = await run('echo x > link-out/through-link 2>/dev/null && echo written || echo refused; ln -sfn / root-link; echo y > root-link/tmp/../root-escape 2>/dev/null && echo root=written || echo root=refused');
    expect(r.output).toContain('refused');
    expect(r.output).toContain('root=refused');
    expect(existsSync(join(outside, 'through-link'))).toBe(false);
    expect(existsSync('/root-escape')).toBe(false);
  });

  it("nothing a person runs later executes the job's code: a submodule's and a nested repository's git config and hooks stay read-only", async () => {
    const repo = join(workspace, 'repo');
    mkdirSync(join(repo, '.git', 'modules', 'sub', 'hooks'), { recursive: true });
    writeFileSync(join(repo, '.git', 'modules', 'sub', 'HEAD'), 'ref: refs/heads/main\n');
    writeFileSync(join(repo, '.git', 'modules', 'sub', 'config'), '[core]\n');
    mkdirSync(join(repo, 'vendor', 'nested', '.git', 'hooks'), { recursive: true });
    writeFileSync(join(repo, 'vendor', 'nested', '.git', 'config'), '[core]\n');
    writeFileSync(join(repo, '.envrc'), 'export A=1\n');
    const r = await run(
      [
        `(printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> .git/modules/sub/config) 2>/dev/null && echo sub=written || echo sub=refused`,
        `(printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> vendor/nested/.git/config) 2>/dev/null && echo nested=written || echo nested=refused`,
        `(echo 'touch /tmp/pwned' > vendor/nested/.git/hooks/post-checkout) 2>/dev/null && echo hook=written || echo hook=refused`,
        `(echo 'curl evil' >> .envrc) 2>/dev/null && echo envrc=written || echo envrc=refused`,
        'touch src-file && echo source=ok',
      ].join('; '),
      { workdir: repo },
    );
    expect(r.output.split('\n')).toEqual(expect.arrayContaining(['sub=refused', 'nested=refused', 'hook=refused', 'envrc=refused', 'source=ok']));
    expect(readFileSync(join(repo, '.git', 'modules', 'sub', 'config'), 'utf8')).toBe('[core]\n');
    expect(readFileSync(join(repo, 'vendor', 'nested', '.git', 'config'), 'utf8')).toBe('[core]\n');
    expect(existsSync(join(repo, 'vendor', 'nested', '.git', 'hooks', 'post-checkout'))).toBe(false);
  });

  it('the private /tmp and /dev/shm hold sandbox.tmpBytes and no more', async () => {
    const r = await run('head -c 4194304 /dev/zero > /tmp/big 2>/dev/null && echo tmp=filled || echo tmp=full; head -c 4194304 /dev/zero > /dev/shm/big 2>/dev/null && echo shm=filled || echo shm=full');
    expect(r.output).toContain('tmp=full');
    expect(r.output).toContain('shm=full');
  });

  it('the legitimate use still works: checkpoint through the channel, writing the workspace, git commit in it', async () => {
    const repo = join(workspace, 'project');
    mkdirSync(repo, { recursive: true });
    execFileSync('git', ['init', '-q', repo]);
    const r = await run(
      [
        // The checkout may be under /tmp, which the sandbox replaces: speak to the channel directly (sandbox.test.ts runs procctl checkpoint).
        `${rpc('$PROCCTL_SOCKET', 'checkpoint', { name: 'built', data: { step: 1 } })} | grep -q '"result"' && echo checkpoint=ok`,
        'echo hello > hello.txt',
        'git add hello.txt && git -c user.name=job -c user.email=job@example.invalid commit -qm first && echo commit=ok',
      ].join('; '),
      { workdir: repo },
    );
    expect(r.output.split('\n')).toEqual(expect.arrayContaining(['checkpoint=ok', 'commit=ok']));
    expect((await s.list()).find((x) => x.sessionId === r.sessionId)?.checkpoint).toMatchObject({ name: 'built', data: { step: 1 } });
    expect(readFileSync(join(repo, 'hello.txt'), 'utf8')).toBe('hello\n');
    expect(execFileSync('git', ['-C', repo, 'log', '--format=%s']).toString().trim()).toBe('first');
  });
});
