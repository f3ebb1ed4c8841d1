import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { spawnProcctld, stopRawDaemons } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { logLines } from '../helpers/state.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';
import { cannotActAsAnotherUser } from '../helpers/caps.js';
import { checkoutFor, removeCheckouts } from '../helpers/readable.js';

/** Why a daemon cannot be started as another user here (setpriv --reuid), or undefined. */
const ANOTHER_USER = cannotActAsAnotherUser();
if (ANOTHER_USER) process.stderr.write(`skipping the test of sandbox.user on a daemon that is not root: ${ANOTHER_USER}\n`);

// A configured sandbox (or limits) that cannot work makes the daemon refuse to start, and a
// reload that asks for one is rejected: never a session run unconfined (SPEC §12).
const fs = scratchRoot('procctl-sbxs-');
const ids = new Set<string>();

afterEach(async () => {
  await stopRawDaemons();
  await stopAllDaemons();
});
afterAll(() => {
  killMarked(ids);
  fs.cleanup();
  removeCheckouts();
});

/** Start procctld with this config and PATH; resolve with how it exited. */
async function refused(name: string, config: unknown, path: string): Promise<{ code: number | string | null; stderr: string; socket: string }> {
  const dir = fs.dir(name);
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify(config));
  const socket = join(dir, 'procctl.sock');
  const d = spawnProcctld(['--socket', socket, '--config', file], { PATH: path, PROCCTL_STATE_DIR: join(dir, 'state') });
  const code = await d.exited;
  return { code, stderr: d.stderr(), socket };
}

/** A directory whose only program is a bwrap that fails the way a host without user namespaces does. */
function refusingBwrap(): string {
  const dir = fs.dir('fake-bin');
  const bwrap = join(dir, 'bwrap');
  writeFileSync(bwrap, "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n");
  chmodSync(bwrap, 0o755);
  return dir;
}

describe('refusal to start', () => {
  it('sandbox.mode set and bwrap not on the daemon\'s PATH: exit 1, naming bwrap and the fix; nothing listens', async () => {
    const r = await refused('no-bwrap', { sandbox: { mode: 'workspace-write' } }, fs.dir('empty-bin'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('sandbox.mode "workspace-write" cannot work: bwrap is not on the daemon\'s PATH');
    expect(r.stderr).toContain('apt-get install -y bubblewrap');
    expect(existsSync(r.socket)).toBe(false);
  });

  it('bwrap refused its namespaces: exit 1 with what bwrap said and what to allow', async () => {
    const r = await refused('no-userns', { sandbox: { mode: 'read-only' } }, `${refusingBwrap()}:/usr/bin:/bin`);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('bwrap cannot create the sandbox on this host: bwrap: No permissions to creating new namespace');
    expect(r.stderr).toContain('user namespaces');
  });

  it('limits set and prlimit not on the daemon\'s PATH: exit 1 (terminal sessions could not be limited)', async () => {
    const r = await refused('no-prlimit', { limits: { cpuSeconds: 5 } }, fs.dir('empty-bin'));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('prlimit');
  });

  it.skipIf(SKIP_SANDBOX)('a sandbox.writable path that does not exist: exit 1 naming it', async () => {
    const r = await refused('no-writable', { sandbox: { mode: 'workspace-write', writable: ['/nonexistent/procctl-writable'] } }, process.env.PATH!);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('sandbox.writable path /nonexistent/procctl-writable does not exist');
  });

  it.skipIf(process.getuid?.() !== 0)('sandbox.user naming no user, or root itself: exit 1 saying which', async () => {
    const none = await refused('no-user', { sandbox: { user: 'procctl-no-such-user' } }, process.env.PATH!);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('sandbox.user "procctl-no-such-user": no such user');
    const root = await refused('root-user', { sandbox: { user: 'root' } }, process.env.PATH!);
    expect(root.code).toBe(1);
    expect(root.stderr).toContain('sandbox.user "root" is root itself');
  });

  it.skipIf(ANOTHER_USER !== undefined)('sandbox.user on a daemon that is not root: exit 1 (only root can run sessions as another user)', async () => {
    const dir = fs.dir('not-root');
    chownSync(dir, 65534, 65534);
    chmodSync(fs.root, 0o755);
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ sandbox: { user: 'nobody' } }));
    const env = { ...process.env, PROCCTL_STATE_DIR: join(dir, 'state'), HOME: dir, PROCCTL_LOG_LEVEL: 'warn' };
    delete env.PROCCTL_SOCKET;
    // Run from where uid 65534 can read it: a checkout under a 0700 directory is copied first.
    const { root } = checkoutFor(65534);
    const args = ['--reuid=65534', '--regid=65534', '--clear-groups', '--', process.execPath, join(root, 'bin', 'procctld'), '--socket', join(dir, 'procctl.sock'), '--config', file];
    const run = spawnSync('setpriv', args, { env, encoding: 'utf8', timeout: 30_000 });
    expect(run.status, run.stderr).toBe(1);
    expect(run.stderr).toContain('sandbox.user is set but the daemon runs as uid 65534, not root');
  });

  it('an invalid sandbox or limits value is a config error (exit 2) naming the key', async () => {
    const mode = await refused('bad-mode', { sandbox: { mode: 'strict' } }, process.env.PATH!);
    expect(mode.code).toBe(2);
    expect(mode.stderr).toContain('sandbox.mode');
    const mem = await refused('bad-mem', { limits: { memoryBytes: 1000 } }, process.env.PATH!);
    expect(mem.code).toBe(2);
    expect(mem.stderr).toContain('limits.memoryBytes');
    const rel = await refused('bad-writable', { sandbox: { writable: ['relative/dir'] } }, process.env.PATH!);
    expect(rel.code).toBe(2);
    expect(rel.stderr).toContain('must be an absolute path');
  });
});

const logged = (d: TestDaemon, msg: RegExp) => logLines(d.stdout()).filter((l) => msg.test(l.msg));

async function reload(d: TestDaemon, config: unknown, msg: RegExp): Promise<any> {
  const before = logged(d, msg).length;
  writeFileSync(join(d.dir, 'config.json'), JSON.stringify(config));
  d.proc.kill('SIGHUP');
  await waitFor(() => logged(d, msg).length > before, { what: `a log line ${msg}` });
  return logged(d, msg).at(-1);
}

describe('SIGHUP reload', () => {
  it('a sandbox this host cannot make is rejected, the old config kept, and status still says off', async () => {
    const d = await startDaemon({ config: {}, env: { PATH: fs.dir('empty-bin-reload'), PROCCTL_LOG_LEVEL: 'info' } });
    const c = await d.client();
    const line = await reload(d, { sandbox: { mode: 'workspace-write' } }, /config reload rejected/);
    expect(line.err).toContain('bwrap is not on the daemon\'s PATH');
    const st = (await c.request('daemon.status')).result.sandbox;
    expect(st.mode).toBe('off');
    expect(st.available).toBe(false);
    expect(st.reason).toContain('bwrap is not on the daemon\'s PATH');
    c.close();
  });

  it('with the sandbox off, status says why it could not be turned on, in what bwrap said (asked while serving)', async () => {
    const d = await startDaemon({ config: {}, env: { PATH: `${refusingBwrap()}:/usr/bin:/bin` } });
    const c = await d.client();
    const [first, second] = await Promise.all([c.request('daemon.status'), c.request('daemon.status')]);
    for (const st of [first.result.sandbox, second.result.sandbox]) {
      expect(st).toMatchObject({ mode: 'off', available: false });
      expect(st.reason).toContain('bwrap cannot create the sandbox on this host: bwrap: No permissions to creating new namespace');
      expect(st.reason).toContain('user namespaces');
    }
    c.close();
  });

  it.skipIf(SKIP_SANDBOX)('a workable sandbox is taken: new sessions run inside it', async () => {
    const d = await startDaemon({ config: {}, env: { PROCCTL_LOG_LEVEL: 'info' } });
    const c = await d.client();
    const s = new Scoped(c, 'reload');
    expect((await c.request('daemon.status')).result.sandbox).toEqual({ mode: 'off', available: true });
    const mark = join('/tmp', `procctl-sbxs-${process.pid}`);
    writeFileSync(mark, '');
    try {
      const probe = `test -e ${mark} && echo host-tmp || echo private-tmp`;
      const before = await s.exec({ command: probe, yieldMs: 30_000 });
      expect(before.output).toBe('host-tmp\n');
      await reload(d, { sandbox: { mode: 'workspace-write' } }, /config reloaded/);
      expect((await c.request('daemon.status')).result.sandbox).toEqual({ mode: 'workspace-write', available: true });
      const after = await s.exec({ command: probe, yieldMs: 30_000 });
      ids.add(after.sessionId);
      expect(after.output).toBe('private-tmp\n');
    } finally {
      rmSync(mark, { force: true });
      c.close();
    }
  });
});
