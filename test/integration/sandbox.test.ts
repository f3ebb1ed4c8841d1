import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, ROOT, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes, sharedDaemon } from '../helpers/session.js';
import { scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

// What a sandboxed session can and cannot touch (SPEC §12), and that elevated escapes it.
const fs = scratchRoot('procctl-sbx-');
const extra = fs.dir('extra-writable');
const outside = fs.dir('outside');
/**
 * Outside every writable path and outside /tmp, which the sandbox replaces (so not the project
 * either, which may be checked out under /tmp).
 */
const readOnly = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), 'procctl-sbx-ro-'));
writeFileSync(join(readOnly, 'probe.txt'), 'first line\nread from the host\n');
afterAll(() => rmSync(readOnly, { recursive: true, force: true }));

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;
const ELEVATED = 'sbx-elevated';
const ASK = 'sbx-ask';

describe.skipIf(SKIP_SANDBOX)('sandbox.mode workspace-write', () => {
  sharedDaemon(
    {
      env: { PROCCTL_KILL_GRACE_MS: '1000' },
      config: { sandbox: { mode: 'workspace-write', workspaces: [fs.root], writable: [extra] }, scopes: { [ELEVATED]: { elevated: 'allow' }, [ASK]: { elevated: 'ask' } } },
    },
    (x) => ({ d, c, scopes } = x),
  );

  const run = async (s: Scoped, command: string, extra: Record<string, unknown> = {}) => {
    const r = await s.exec({ command, yieldMs: 30_000, stdin: 'null', ...extra });
    scopes.track(r.pid);
    return r;
  };

  it('daemon.status reports the sandbox as configured and available', async () => {
    const st = await c.request('daemon.status');
    expect(st.result.sandbox).toEqual({ mode: 'workspace-write', available: true });
  });

  it('the workdir, PROCCTL_TMPDIR, a private /tmp and sandbox.writable are writable; the rest is read-only but readable', async () => {
    const s = scopes.next('fs');
    const work = fs.dir('work-fs');
    const hostTmpMark = join('/tmp', `procctl-sbx-host-${process.pid}`);
    writeFileSync(hostTmpMark, 'host');
    try {
      const r = await run(
        s,
        [
          'touch in-workdir && echo workdir=ok',
          `touch "$PROCCTL_TMPDIR/x" && echo scratch=ok`,
          `touch ${extra}/x && echo extra=ok`,
          `echo job > /tmp/from-job && echo tmp=ok`,
          `test -e ${hostTmpMark} && echo host-tmp=seen || echo host-tmp=hidden`,
          `touch ${readOnly}/sandbox-probe 2>/dev/null && echo outside=written || echo outside=refused`,
          `sed -n 2p ${readOnly}/probe.txt`,
          'grep NoNewPrivs /proc/self/status',
        ].join('; '),
        { workdir: work },
      );
      expect(r.status, r.text).toBe('completed');
      expect(r.output.split('\n')).toEqual(
        expect.arrayContaining(['workdir=ok', 'scratch=ok', 'extra=ok', 'tmp=ok', 'host-tmp=hidden', 'outside=refused', 'read from the host', 'NoNewPrivs:\t1']),
      );
      expect(existsSync(join(work, 'in-workdir'))).toBe(true);
      expect(existsSync(join(extra, 'x'))).toBe(true);
      expect(existsSync(join(readOnly, 'sandbox-probe'))).toBe(false);
      expect(existsSync('/tmp/from-job')).toBe(false);
    } finally {
      rmSync(hostTmpMark, { force: true });
    }
  });

  it(".git/hooks and .git/config under the workdir stay read-only, and .git cannot be swapped; the rest of .git is writable", async () => {
    const s = scopes.next('git');
    const repo = fs.dir('repo');
    mkdirSync(join(repo, '.git', 'hooks'), { recursive: true });
    mkdirSync(join(repo, '.git', 'objects'), { recursive: true });
    writeFileSync(join(repo, '.git', 'config'), '[core]\n');
    const noHooks = fs.dir('repo-without-hooks');
    mkdirSync(join(noHooks, '.git'));
    const r = await run(
      s,
      [
        `(echo 'echo pwned' > .git/hooks/pre-commit) 2>/dev/null && echo hook=written || echo hook=refused`,
        `(echo '[core] hooksPath = /x' >> .git/config) 2>/dev/null && echo config=written || echo config=refused`,
        `mv .git .git-moved 2>/dev/null && echo swap=done || echo swap=refused`,
        `touch .git/objects/o && echo objects=ok`,
        `(mkdir -p ${noHooks}/.git/hooks && echo x > ${noHooks}/.git/hooks/post-checkout) 2>/dev/null && echo new-hook=written || echo new-hook=refused`,
      ].join('; '),
      { workdir: repo },
    );
    expect(r.output.split('\n')).toEqual(expect.arrayContaining(['hook=refused', 'config=refused', 'swap=refused', 'objects=ok']));
    expect(readFileSync(join(repo, '.git', 'config'), 'utf8')).toBe('[core]\n');
    expect(existsSync(join(repo, '.git', 'hooks', 'pre-commit'))).toBe(false);
    expect(existsSync(join(noHooks, '.git', 'hooks', 'post-checkout'))).toBe(false);
  });

  describe('the network', () => {
    let server: Server;
    let port = 0;
    beforeAll(async () => {
      server = createServer((sock) => sock.end('hello from the host\n'));
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
      port = (server.address() as { port: number }).port;
    });
    afterAll(() => new Promise<void>((r) => server.close(() => r())));

    const dial = () => `bash -c 'exec 3<>/dev/tcp/127.0.0.1/${port} && head -1 <&3 || echo unreachable'`;

    it('a TCP server on the host loopback is reachable unsandboxed (elevated) and not from the sandbox', async () => {
      const elevated = await run(new Scoped(c, ELEVATED), dial(), { elevated: true });
      expect(elevated.output).toContain('hello from the host');
      const sandboxed = await run(scopes.next('net'), dial());
      expect(sandboxed.output).toContain('unreachable');
      expect(sandboxed.output).not.toContain('hello from the host');
    });

    it('the sandbox has a loopback of its own', async () => {
      const node = process.execPath;
      const script = `const n=require('net');const s=n.createServer(c=>c.end('inside\\n')).listen(0,'127.0.0.1',()=>{n.connect(s.address().port,'127.0.0.1').on('data',d=>{process.stdout.write(d);process.exit(0)})})`;
      const r = await run(scopes.next('lo'), `${node} -e "${script}"`);
      expect(r.output).toBe('inside\n');
    });
  });

  it.each([
    ['on pipes', false],
    ['on a terminal', true],
  ])("procctl checkpoint works from inside %s, through the session's own channel ($PROCCTL_SOCKET is fd:N)", async (_how, pty) => {
    const s = scopes.next('checkpoint');
    const procctl = `${process.execPath} ${join(ROOT, 'bin', 'procctl')}`;
    // Two at once: each asks the channel for a connection of its own.
    const r = await run(s, `echo "$PROCCTL_SOCKET"; ${procctl} checkpoint halfway --data '{"n":1}' & ${procctl} checkpoint also; wait $! && echo reported`, { pty });
    expect(r.status, r.text).toBe('completed');
    expect(r.output).toMatch(/^fd:\d+\r?$/m);
    expect(r.output).toContain('reported');
    const [listed] = await s.list();
    expect(['halfway', 'also']).toContain(listed.checkpoint.name);
  });

  it('the job cannot see or signal the daemon: its own PID namespace', async () => {
    const r = await run(scopes.next('pid'), `kill -0 ${d.proc.pid} 2>/dev/null && echo daemon-visible || echo daemon-hidden`);
    expect(r.output).toContain('daemon-hidden');
  });

  it('elevated:true runs on the host: outside the sandbox, with the host /tmp', async () => {
    const s = new Scoped(c, ELEVATED);
    const mark = join(outside, 'elevated-wrote');
    const r = await run(s, `touch ${mark} && echo wrote; kill -0 ${d.proc.pid} && echo daemon-visible`, { elevated: true });
    expect(r.output).toContain('wrote');
    expect(r.output).toContain('daemon-visible');
    expect(existsSync(mark)).toBe(true);
  });

  it('elevated where the scope asks: approved, it runs outside the sandbox; the same command unelevated stays inside', async () => {
    const s = new Scoped(c, ASK);
    const probe = `kill -0 ${d.proc.pid} 2>/dev/null && echo on-host || echo in-sandbox`;
    const asked = await s.exec({ command: probe, elevated: true, yieldMs: 30_000 });
    expect(asked.status).toBe('approval_required');
    const answered = await s.process({ action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, ...asPerson(d) });
    scopes.track(answered.pid);
    const { output } = answered.status === 'running' ? await s.pollUntilEnded(asked.sessionId) : answered;
    expect(output).toBe('on-host\n');
    const plain = await run(s, probe);
    expect(plain.output).toBe('in-sandbox\n');
  });

  it('elevated is still refused where the scope denies it', async () => {
    const err = await scopes.next('deny').error('exec', { command: 'true', elevated: true });
    expect(err.data.kind).toBe('forbidden');
  });
});

describe.skipIf(SKIP_SANDBOX)('sandbox.mode read-only', () => {
  let ro: Scopes;
  sharedDaemon({ config: { sandbox: { mode: 'read-only', writable: [extra] } } }, (x) => (ro = x.scopes));

  it('only PROCCTL_TMPDIR and the private /tmp are writable: not the workdir, not sandbox.writable', async () => {
    const s = ro.next('ro');
    const work = fs.dir('work-ro');
    const r = await s.exec({
      command: [
        `touch in-workdir 2>/dev/null && echo workdir=written || echo workdir=refused`,
        `touch ${extra}/ro 2>/dev/null && echo extra=written || echo extra=refused`,
        `touch "$PROCCTL_TMPDIR/x" && echo scratch=ok`,
        `touch /tmp/x && echo tmp=ok`,
        'pwd',
      ].join('; '),
      workdir: work,
      yieldMs: 30_000,
    });
    ro.track(r.pid);
    expect(r.output.split('\n')).toEqual(expect.arrayContaining(['workdir=refused', 'extra=refused', 'scratch=ok', 'tmp=ok', work]));
    expect(existsSync(join(work, 'in-workdir'))).toBe(false);
  });
});

afterAll(() => fs.cleanup());
