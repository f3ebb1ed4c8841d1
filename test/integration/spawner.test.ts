import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, ROOT, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';

afterAll(stopAllDaemons);

// Jobs on pipes start through posix_spawn (native/spawn.c); with PROCCTL_SPAWN=node, or where the
// addon is not built, through Node's child_process. Both must give a job the same world.
describe.each([
  { spawner: 'posix_spawn', reason: null, env: {} },
  { spawner: 'fork', reason: /^PROCCTL_SPAWN=node is set/, env: { PROCCTL_SPAWN: 'node' } },
])('jobs started through $spawner', ({ spawner, reason, env }) => {
  let d: TestDaemon;
  let c: TestClient;
  beforeAll(async () => {
    d = await startDaemon({ env });
    c = await d.client();
  });
  afterAll(() => c.close());

  it('daemon.status names the way jobs start, and why not through the addon', async () => {
    const status = await c.call('daemon.status');
    expect(status.spawner).toBe(spawner);
    if (reason === null) expect(status.spawnerReason).toBeNull();
    else expect(status.spawnerReason).toMatch(reason);
  });

  it('a job leads its own session and group, with no signal ignored or blocked', async () => {
    const r = await c.exec({ command: 'ps -o pid=,pgid=,sid= -p $$; grep -E "^Sig(Ign|Blk)" /proc/$$/status' });
    expect(r.status).toBe('completed');
    const [pid, pgid, sid] = r.output.trim().split('\n')[0].trim().split(/\s+/).map(Number);
    expect(pid).toBeGreaterThan(1);
    expect(pgid).toBe(pid);
    expect(sid).toBe(pid);
    // Node ignores SIGPIPE; a job must not inherit that (`yes | head -1` would never end).
    expect(r.output).toMatch(/SigBlk:\s+0+\n/);
    expect(r.output).toMatch(/SigIgn:\s+0+\n/);
  });

  it('runs in the workdir with the merged environment, stdout and stderr apart', async () => {
    const r = await c.exec({ command: 'pwd; echo "$GREETING" >&2', workdir: '/tmp', env: { GREETING: 'hello there' } });
    expect(r.exitCode).toBe(0);
    const log = await c.process({ action: 'log', sessionId: r.sessionId });
    expect(log.text).toContain('/tmp');
    expect(log.text).toContain('hello there');
  });

  it('stdin "pipe" takes writes and EOF; stdin "null" reads end-of-input at once', async () => {
    const r = await c.exec({ command: 'cat', background: true });
    await c.process({ action: 'write', sessionId: r.sessionId, data: 'line one\n', eof: true });
    let done = await c.process({ action: 'poll', sessionId: r.sessionId, timeout: 20_000 });
    while (done.status === 'running') done = await c.process({ action: 'poll', sessionId: r.sessionId, timeout: 20_000 });
    expect(done.status).toBe('completed');
    expect(done.exitCode).toBe(0);
    const log = await c.process({ action: 'log', sessionId: r.sessionId });
    expect(log.text).toContain('line one');
    const n = await c.exec({ command: 'cat; echo "read ended"', stdin: 'null' });
    expect(n.status).toBe('completed');
    expect(n.output).toContain('read ended');
  });

  it('reports the signal that ended the leader, and never leaves it a zombie', async () => {
    const r = await c.exec({ command: 'echo $$; kill -USR1 $$' });
    expect(r.status).toBe('failed');
    expect(r.signal).toBe('SIGUSR1');
    const pid = Number(r.output.trim());
    await waitFor(() => !alive(pid), { what: `pid ${pid} gone` });
    // kill(pid, 0) succeeds on a zombie: only a reaped child makes it fail.
    await waitFor(() => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    }, { what: `pid ${pid} reaped` });
  });

  it('many short jobs at once all finish, each with its own exit code', async () => {
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => c.exec({ command: `exit ${i % 7}` })));
    expect(results.map((r) => r.exitCode)).toEqual(Array.from({ length: 40 }, (_, i) => i % 7));
  });
});

// Where the install could not build the addon (no compiler, no headers): the daemon runs from a
// copy of the build that has neither build/Release/procctl.node nor a prebuilt addon.
describe('a daemon whose addon is not built', () => {
  let root: string;
  let proc: ChildProcess;
  let log = '';
  let c: TestClient;
  beforeAll(async () => {
    root = mkdtempSync(join(tmpdir(), 'procctl-no-addon-'));
    for (const part of ['dist', 'bin', 'package.json']) cpSync(join(ROOT, part), join(root, part), { recursive: true });
    symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
    const socket = join(root, 'run', 'procctl.sock');
    const env: NodeJS.ProcessEnv = { ...process.env, XDG_CONFIG_HOME: join(root, 'config'), PROCCTL_STATE_DIR: join(root, 'state'), PROCCTL_LOG_LEVEL: 'warn' };
    delete env.PROCCTL_SPAWN;
    delete env.PROCCTL_SOCKET;
    proc = spawn(process.execPath, [...DAEMON_NODE_FLAGS, join(root, 'bin', 'procctld'), '--socket', socket], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    proc.stdout!.setEncoding('utf8').on('data', (d: string) => (log += d));
    proc.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
    c = await waitFor(
      () => {
        if (proc.exitCode !== null) throw new Error(`procctld exited with ${proc.exitCode}: ${log}`);
        return TestClient.connect(socket).catch(() => undefined);
      },
      { what: 'procctld without its addon to listen' },
    );
  });
  afterAll(async () => {
    c?.close();
    if (proc && proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once('exit', r));
      proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    }
    rmSync(root, { recursive: true, force: true });
  });

  it('daemon.status says jobs start through fork, why, and what to install', async () => {
    const status = await c.call('daemon.status');
    expect(status.spawner).toBe('fork');
    expect(status.spawnerReason).toContain(`the native addon is not built (no build/Release/procctl.node or prebuilds/${process.platform}-${process.arch}/)`);
    expect(status.spawnerReason).toContain('apt-get install -y python3 make g++');
    expect(status.spawnerReason).toContain('node scripts/build-addon.mjs');
  });

  it('warns at start with the reason and the fix', async () => {
    const line = await waitFor(() => log.split('\n').find((l) => l.includes('jobs start through fork')), { what: 'the spawner warning' });
    const entry = JSON.parse(line);
    expect(entry.level).toBe(40);
    expect(entry.msg).toContain('is not built');
    expect(entry.msg).toContain('apt-get install -y python3 make g++');
  });

  it('still runs jobs', async () => {
    const r = await c.exec({ command: 'echo started without the addon' });
    expect(r.status).toBe('completed');
    expect(r.output).toContain('started without the addon');
  });
});
