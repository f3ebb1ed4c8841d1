import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
// @ts-expect-error: node-gyp-build ships no type declarations.
import nodeGypBuild from 'node-gyp-build';
import { asPerson, ROOT, startDaemon, type TestDaemon } from '../helpers/daemon.js';
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

/**
 * The addon, copied where a sandboxed job can load it (the checkout may be under /tmp, which the
 * sandbox replaces): a job asks its inherited channel for a connection through it.
 */
const addonCopy = join(base, 'procctl.node');
copyFileSync((nodeGypBuild as { resolve(dir: string): string }).resolve(ROOT), addonCopy);

/** A node one-liner that asks the session's channel (`$PROCCTL_SOCKET` is `fd:N`) for a connection and sends one JSON-RPC request there. */
const viaChannel = (method: string, params: object) =>
  `${NODE} -e 'const fd=Number(process.env.PROCCTL_SOCKET.slice(3));const s=new (require("net").Socket)({fd:require(process.argv[1]).receiveConnection(fd,10000)});s.write(JSON.stringify({jsonrpc:"2.0",id:1,method:process.argv[2],params:JSON.parse(process.argv[3])})+"\\n");s.on("data",b=>{console.log(String(b).trim());s.end();})' ${addonCopy} ${method} '${JSON.stringify(params)}'`;

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
        viaChannel('exec', { command: 'id', scope }),
        viaChannel('exec', { command: 'id', elevated: true, scope }),
        viaChannel('process', { action: 'resume', sessionId: pending.sessionId, input: { confirm: true }, scope }),
        viaChannel('checkpoint', { sessionId: pending.sessionId, name: 'not-mine' }),
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

  it("a job that holds a directory open and renames a person's repository over it does not get that repository's hooks unprotected at the next start", async () => {
    const attack = join(workspace, 'attack');
    mkdirSync(join(attack, 'x'), { recursive: true });
    mkdirSync(join(attack, 'repo', '.git', 'hooks'), { recursive: true });
    writeFileSync(join(attack, 'repo', '.git', 'config'), '[core]\n');
    // A start lists (and keeps) the empty x.
    expect((await run('ls -a attack/x | wc -l')).output.trim()).toBe('2');
    // Held open, x's own removal is not told until it is let go; its parent's rename event is.
    const holder = await run('exec 3<attack/x; mv -T attack/repo attack/x && echo moved; exec sleep 60', { background: true, yieldMs: undefined });
    await s.waitOutput(holder.sessionId, 'moved');
    try {
      const r = await run(`(echo 'touch /tmp/pwned' > attack/x/.git/hooks/post-checkout) 2>/dev/null && echo hook=written || echo hook=refused; (echo x >> attack/x/.git/config) 2>/dev/null && echo config=written || echo config=refused`);
      expect(r.output.split('\n')).toEqual(expect.arrayContaining(['hook=refused', 'config=refused']));
      expect(existsSync(join(attack, 'x', '.git', 'hooks', 'post-checkout'))).toBe(false);
    } finally {
      await s.process({ action: 'kill', sessionId: holder.sessionId });
    }
  });

  it('a repository one job made is protected at the very next start, though the daemon keeps what it listed of the workspace between starts', async () => {
    const made = await run("mkdir -p later/.git && printf '[core]\\n' > later/.git/config && echo made");
    expect(made.output.trim()).toBe('made');
    // At once: the listings kept since the last start are let go by the change the job made inside its own mount namespace.
    const r = await run(`(printf '[core]\\n\\tfsmonitor = touch /tmp/pwned\\n' >> later/.git/config) 2>/dev/null && echo config=written || echo config=refused; touch later/file && echo source=ok`);
    expect(r.output.split('\n')).toEqual(expect.arrayContaining(['config=refused', 'source=ok']));
    expect(readFileSync(join(workspace, 'later', '.git', 'config'), 'utf8')).toBe('[core]\n');
  });

  it('the private /tmp and /dev/shm hold sandbox.tmpBytes and no more', async () => {
    const r = await run('head -c 4194304 /dev/zero > /tmp/big 2>/dev/null && echo tmp=filled || echo tmp=full; head -c 4194304 /dev/zero > /dev/shm/big 2>/dev/null && echo shm=filled || echo shm=full');
    expect(r.output).toContain('tmp=full');
    expect(r.output).toContain('shm=full');
  });

  it('a job that floods its channel with asks holds at most the capped connections; its own checkpoint still works and the daemon serves others', async () => {
    const r = await run(
      [
        // 5,000 asks nobody takes: the daemon answers at most its cap and drops the rest.
        'head -c 5000 /dev/zero >&"${PROCCTL_SOCKET#fd:}"',
        `${viaChannel('checkpoint', { name: 'after-flood' })} | grep -q '"result"' && echo checkpoint=ok`,
      ].join('; '),
    );
    expect(r.output).toContain('checkpoint=ok');
    expect((await s.list()).find((x) => x.sessionId === r.sessionId)?.checkpoint).toMatchObject({ name: 'after-flood' });
    const other = await new Scoped(await d.client(), 'bystander').exec({ command: 'echo served' });
    expect(other.output).toBe('served\n');
  });

  it('a Unix socket on the host (an agent, a Docker socket, a bus) cannot be reached: no Unix socket can be made inside', async () => {
    const heard = await hostSocket();
    try {
      const r = await run(`test -S ${heard.path} && echo socket=visible; ${rpc(heard.path, 'ping', {})}`);
      expect(r.output).toContain('socket=visible');
      expect(r.output).toContain('connect-error EPERM');
      expect(heard.connections).toBe(0);
    } finally {
      await heard.close();
    }
  });

  it('the legitimate use still works: checkpoint through the channel, writing the workspace, git commit in it', async () => {
    const repo = join(workspace, 'project');
    mkdirSync(repo, { recursive: true });
    execFileSync('git', ['init', '-q', repo]);
    const r = await run(
      [
        // The checkout may be under /tmp, which the sandbox replaces: speak to the channel directly (sandbox.test.ts runs procctl checkpoint).
        `${viaChannel('checkpoint', { name: 'built', data: { step: 1 } })} | grep -q '"result"' && echo checkpoint=ok`,
        // Pairs of sockets reach nothing outside the job: child processes on them still work.
        `${NODE} -e 'require("child_process").exec("echo pair", (e, o) => console.log(o.trim() + "=ok"))'`,
        'echo hello > hello.txt',
        'git add hello.txt && git -c user.name=job -c user.email=job@example.invalid commit -qm first && echo commit=ok',
      ].join('; '),
      { workdir: repo },
    );
    expect(r.output.split('\n')).toEqual(expect.arrayContaining(['checkpoint=ok', 'pair=ok', 'commit=ok']));
    expect((await s.list()).find((x) => x.sessionId === r.sessionId)?.checkpoint).toMatchObject({ name: 'built', data: { step: 1 } });
    expect(readFileSync(join(repo, 'hello.txt'), 'utf8')).toBe('hello\n');
    expect(execFileSync('git', ['-C', repo, 'log', '--format=%s']).toString().trim()).toBe('first');
  });
});

/** A Unix socket server on the host, outside every writable tree (visible, read-only, inside), counting who connects. */
async function hostSocket(): Promise<{ path: string; connections: number; close(): Promise<void> }> {
  const path = join(outside, `host-${process.pid}.sock`);
  rmSync(path, { force: true });
  const open = new Set<Socket>();
  const heard = {
    path,
    connections: 0,
    close: () =>
      new Promise<void>((r) => {
        server.close(() => r());
        for (const c of open) c.destroy();
      }),
  };
  const server = createServer((c) => {
    heard.connections++;
    open.add(c);
    c.end('{"jsonrpc":"2.0","id":1,"result":"from the host"}\n');
  });
  await new Promise<void>((r) => server.listen(path, () => r()));
  return heard;
}

describe.skipIf(SKIP_SANDBOX)('sandbox.allowUnixSockets: true', () => {
  let lifted: TestDaemon;
  let s: Scoped;
  beforeAll(async () => {
    lifted = await startDaemon({ base, config: { sandbox: { mode: 'workspace-write', workspaces: [workspace], allowUnixSockets: true } } });
    s = new Scoped(await lifted.client(), 'lifted');
  });
  afterAll(() => lifted?.stop());

  it('lifts the filter: a tool that needs its own Unix sockets works, and a readable host socket is reachable (what the setting gives up)', async () => {
    const heard = await hostSocket();
    try {
      const own = `${NODE} -e 'const n=require("net");const p="/tmp/own.sock";n.createServer(c=>c.end("own\\n")).listen(p,()=>n.connect(p).on("data",d=>{process.stdout.write(d);process.exit(0)}))'`;
      const r = await s.exec({ command: `${own}; ${rpc(heard.path, 'ping', {})}`, yieldMs: 30_000, timeout: 20, stdin: 'null', workdir: workspace });
      sessions.add(r.sessionId);
      expect(r.output).toContain('own');
      expect(r.output).toContain('from the host');
      expect(heard.connections).toBe(1);
    } finally {
      await heard.close();
    }
  });
});
