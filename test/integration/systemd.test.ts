import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { PROCCTL, PROCCTLD, ROOT, waitFor } from '../helpers/daemon.js';
import { killLeftovers, spawnProcctld, stopRawDaemons } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { cli } from '../cli/run.js';
import { cmdline, makeStateDir, removeStateDirs } from '../helpers/state.js';

const started = new Set<number>();
const children = new Set<ChildProcess>();
const dirs: string[] = [];

afterEach(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
  children.clear();
  await stopRawDaemons();
  killLeftovers(started);
});

afterAll(() => {
  removeStateDirs();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const d = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(d);
  return d;
}

/** Absolute path of a program on PATH, or undefined. */
function which(name: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(':')) {
    try {
      const p = join(dir, name);
      if (statSync(p).isFile()) return p;
    } catch {
      // not here
    }
  }
  return undefined;
}

const SOCKET_ACTIVATE = which('systemd-socket-activate');
const ANALYZE = which('systemd-analyze');
/** A skipped test says why in its name. */
const needs = (tool: string | undefined, name: string, title: string) => (tool ? title : `${title} (skipped: ${name} is not installed)`);

/** `systemd-socket-activate -l SOCK ... procctld EXTRA...`: it listens, and execs the daemon on the first connection. */
function activate(sock: string, dir: string, extra: string[], env: string[] = []) {
  const state = makeStateDir();
  const child = spawn(
    SOCKET_ACTIVATE!,
    [
      '-l', sock,
      '-E', `PROCCTL_STATE_DIR=${state}`,
      '-E', `XDG_CONFIG_HOME=${join(dir, 'config')}`,
      // Not the test's own socket: a daemon that took the default path would be told apart.
      '-E', `PROCCTL_SOCKET=${join(dir, 'elsewhere', 'procctl.sock')}`,
      ...env.flatMap((e) => ['-E', e]),
      process.execPath, PROCCTLD, ...extra, '--log-level', 'warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  children.add(child);
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (out += d));
  const exited = new Promise<number | string | null>((r) => child.on('exit', (code, signal) => r(code ?? signal)));
  /** SIGTERM, and how it exited (a string when it did not within 40 s: a loaded machine's stop takes seconds). */
  const stop = () => {
    child.kill('SIGTERM');
    return Promise.race([exited, new Promise((r) => setTimeout(() => r('still running after 40 s'), 40_000))]);
  };
  return { child, out: () => out, exited, stop };
}

describe('socket activation', () => {
  // systemd-socket-activate (without --accept) listens itself and, on the first connection, execs
  // the command in its own process with the listening socket as fd 3 (LISTEN_FDS=1).
  it.skipIf(!SOCKET_ACTIVATE)(needs(SOCKET_ACTIVATE, 'systemd-socket-activate', 'procctld serves the socket it is handed (LISTEN_FDS) and exits on SIGTERM'), async () => {
    const dir = tempDir('procctl-activate-');
    const sock = join(dir, 'procctl.sock');
    const { child, out, stop } = activate(sock, dir, ['--socket', sock]);

    await waitFor(() => /Listening on/.test(out()), { what: 'systemd-socket-activate to listen' });
    const inode = statSync(sock).ino;
    expect(cmdline(child.pid!)).toContain('systemd-socket-activate');

    // The first connection starts the daemon; its request is answered on the inherited socket.
    const c = await TestClient.connect(sock);
    const r = await c.exec({ command: 'echo activated; env', yieldMs: 20_000 });
    expect(r.status).toBe('completed');
    expect(r.output).toMatch(/^activated\n/);
    // The activation variables are the daemon's, not the job's.
    expect(r.output).not.toMatch(/^LISTEN_(FDS|PID|FDNAMES)=/m);
    expect(cmdline(child.pid!), 'the same process now runs procctld').toContain(PROCCTLD);
    const status = await c.call('daemon.status');
    expect(status.pid).toBe(child.pid);
    // The daemon used the socket it was given: the file is still the one systemd-socket-activate made.
    expect(statSync(sock).ino).toBe(inode);
    c.close();
    const again = await TestClient.connect(sock);
    expect((await again.exec({ command: 'echo second' })).output).toBe('second\n');
    again.close();

    expect(await stop(), out()).toBe(0);
  });

  // Without --socket the daemon must not place its files by the default path ($PROCCTL_SOCKET here):
  // the approver credential and the runtime directory go beside the socket it was handed.
  it.skipIf(!SOCKET_ACTIVATE)(needs(SOCKET_ACTIVATE, 'systemd-socket-activate', 'without --socket, the files beside the socket follow the inherited socket (getsockname), and procctl resume finds the credential'), async () => {
    const dir = tempDir('procctl-activate-');
    const sock = join(dir, 'run', 'a.sock');
    mkdirSync(join(dir, 'run'), { mode: 0o700 });
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ approvals: { rules: [{ command: ['touch'], action: 'ask' }] } }));
    const { out, stop } = activate(sock, dir, [], [`PROCCTL_CONFIG=${config}`]);
    await waitFor(() => /Listening on/.test(out()), { what: 'systemd-socket-activate to listen' });

    const c = await TestClient.connect(sock);
    const r = await c.exec({ command: 'echo activated', yieldMs: 20_000 });
    expect(r.status, out()).toBe('completed');
    expect((await c.call('daemon.status')).socket).toBe(sock);
    expect(readdirSync(join(dir, 'run')).sort()).toEqual(['a.sock', 'a.sock.approver', 'a.sock.d']);

    const ask = await c.exec({ command: `touch ${join(dir, 'made')}`, yieldMs: 20_000 });
    expect(ask.status).toBe('approval_required');
    const answered = await cli(['--socket', sock, 'resume', ask.sessionId, '--yes']);
    expect(answered.code, answered.stderr).toBe(0);
    await waitFor(() => statSync(join(dir, 'made'), { throwIfNoEntry: false }) !== undefined, { what: 'the approved touch to run' });
    c.close();

    expect(await stop(), out()).toBe(0);
  });

  it.skipIf(!SOCKET_ACTIVATE)(needs(SOCKET_ACTIVATE, 'systemd-socket-activate', 'a --socket that is not the inherited socket is refused, naming both'), async () => {
    const dir = tempDir('procctl-activate-');
    const sock = join(dir, 'a.sock');
    const other = join(dir, 'b.sock');
    const { out, exited } = activate(sock, dir, ['--socket', other]);
    await waitFor(() => /Listening on/.test(out()), { what: 'systemd-socket-activate to listen' });
    await TestClient.connect(sock).then((c) => c.close(), () => undefined);
    expect(await exited).toBe(2);
    expect(out()).toContain(`--socket ${other} is not the socket systemd handed over (${sock})`);
  });
});

interface Datagram {
  at: number;
  fields: Record<string, string>;
}

describe('sd_notify', () => {
  it('READY=1 once the socket answers, WATCHDOG=1 repeatedly, STOPPING=1 before the exit; sessions do not inherit the variables', async () => {
    const unix = createRequire(import.meta.url)('unix-dgram') as {
      createSocket(type: 'unix_dgram', onMessage: (buf: Buffer) => void): {
        bind(path: string): void;
        on(event: string, fn: (...args: any[]) => void): void;
        close(): void;
      };
    };
    const dir = tempDir('procctl-notify-');
    const notifyPath = join(dir, 'notify.sock');
    const sock = join(dir, 'run', 'procctl.sock');
    const received: Datagram[] = [];
    let readyAnswered: Promise<boolean> | undefined;
    const server = unix.createSocket('unix_dgram', (buf) => {
      const fields = Object.fromEntries(
        buf
          .toString('utf8')
          .split('\n')
          .filter(Boolean)
          .map((l) => [l.slice(0, l.indexOf('=')), l.slice(l.indexOf('=') + 1)]),
      );
      received.push({ at: Date.now(), fields });
      // The moment READY=1 arrives, the socket must already answer.
      if (fields.READY === '1' && !readyAnswered) {
        readyAnswered = TestClient.connect(sock).then(
          (c) => (c.close(), true),
          () => false,
        );
      }
    });
    await new Promise<void>((resolve, reject) => {
      server.on('listening', () => resolve());
      server.on('error', reject);
      server.bind(notifyPath);
    });
    try {
      const state = makeStateDir();
      const d = spawnProcctld(['--socket', sock], {
        XDG_CONFIG_HOME: join(dir, 'config'),
        PROCCTL_STATE_DIR: state,
        PROCCTL_KILL_GRACE_MS: '1500',
        NOTIFY_SOCKET: notifyPath,
        WATCHDOG_USEC: '200000',
      });
      await waitFor(() => readyAnswered !== undefined, { what: 'READY=1' });
      expect(await readyAnswered, 'the socket answers when READY=1 arrives').toBe(true);
      const ready = received.find((m) => m.fields.READY === '1')!;
      expect(ready.fields.STATUS).toMatch(/running/);
      expect(ready.fields.MAINPID).toBe(String(d.proc.pid));

      const watchdogs = () => received.filter((m) => m.fields.WATCHDOG === '1');
      await waitFor(() => watchdogs().length >= 5, { what: 'five WATCHDOG=1 pings' });
      const w = watchdogs();
      const gaps = w.slice(1).map((m, i) => m.at - w[i].at);
      console.log(`WATCHDOG=1 gaps (WATCHDOG_USEC=200000, so expected about 100 ms): ${gaps.join(', ')} ms`);

      let c = await TestClient.connect(sock);
      const env = await c.exec({ command: 'env' });
      expect(env.status).toBe('completed');
      expect(env.output).toMatch(/^PROCCTL_SESSION_ID=/m);
      expect(env.output).not.toMatch(/^(NOTIFY_SOCKET|WATCHDOG_USEC|WATCHDOG_PID)=/m);
      c.close();

      // systemctl reload (ExecReload: kill -USR2): the new image in the same PID goes on notifying,
      // READY=1 and the watchdog, or systemd would kill it at the next WatchdogSec.
      const readies = () => received.filter((m) => m.fields.READY === '1').length;
      process.kill(d.proc.pid!, 'SIGUSR2');
      await waitFor(() => readies() >= 2, { what: 'READY=1 from the new image', timeoutMs: 30_000 });
      const afterReload = received.length;
      await waitFor(() => received.slice(afterReload).filter((m) => m.fields.WATCHDOG === '1').length >= 3, { what: 'WATCHDOG=1 from the new image' });
      expect(received.filter((m) => m.fields.READY === '1').at(-1)!.fields.MAINPID).toBe(String(d.proc.pid));
      c = await TestClient.connect(sock);
      expect((await c.call('daemon.status')).restarts.planned).toBe(1);
      const env2 = await c.exec({ command: 'env' });
      expect(env2.output).not.toMatch(/^(NOTIFY_SOCKET|WATCHDOG_USEC|WATCHDOG_PID|PROCCTL_HANDOVER)=/m);

      // A session that ignores SIGTERM keeps the shutdown going for the grace: STOPPING=1 must come first.
      const stubborn = await c.exec({ command: `trap '' TERM; echo ready; sleep 600`, background: true });
      started.add(stubborn.pid);
      await waitFor(async () => (await c.process({ action: 'log', sessionId: stubborn.sessionId })).output.includes('ready'), { what: 'ready' });
      c.close();

      const sentAt = Date.now();
      d.proc.kill('SIGTERM');
      expect(await d.exited).toBe(0);
      const exitedAt = Date.now();
      await waitFor(() => received.some((m) => m.fields.STOPPING === '1'), { timeoutMs: 5000, what: 'STOPPING=1' }).catch(() => undefined);
      const stopping = received.find((m) => m.fields.STOPPING === '1');
      expect(stopping, 'STOPPING=1 was sent').toBeDefined();
      console.log(`STOPPING=1 ${stopping!.at - sentAt} ms after SIGTERM; exit ${exitedAt - sentAt} ms after SIGTERM`);
      expect(stopping!.at).toBeLessThan(exitedAt);
      expect(stopping!.fields.STATUS).toMatch(/stopping 1 running/);
    } finally {
      server.close();
    }
  });
});

describe('unit files', () => {
  const user = userInfo().username;
  const group = (() => {
    const r = spawnSync('id', ['-gn'], { encoding: 'utf8' });
    return r.status === 0 ? r.stdout.trim() : user;
  })();

  /** key → values of a unit file (comments and sections ignored). */
  function keys(file: string): Map<string, string[]> {
    const out = new Map<string, string[]>();
    for (const line of readFileSync(file, 'utf8').split('\n')) {
      const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
      if (!m) continue;
      out.set(m[1], [...(out.get(m[1]) ?? []), m[2]]);
    }
    return out;
  }

  /** systemd time span in seconds ("30", "30s", "1min", "2min 30s"). */
  function seconds(span: string): number {
    let total = 0;
    for (const [, n, unit] of span.matchAll(/(\d+)\s*(ms|s|sec|m|min|h)?/g)) {
      const v = Number(n);
      total += unit === 'ms' ? v / 1000 : unit === 'm' || unit === 'min' ? v * 60 : unit === 'h' ? v * 3600 : v;
    }
    return total;
  }

  function verify(files: string[], userMode: boolean, runtimeDir?: string) {
    const env = { ...process.env, ...(runtimeDir ? { XDG_RUNTIME_DIR: runtimeDir } : {}), SYSTEMD_LOG_COLOR: '0' };
    const args = [...(userMode ? ['--user'] : []), 'verify', ...files];
    const r = spawnSync(ANALYZE!, args, { encoding: 'utf8', env });
    return { status: r.status, output: `${r.stdout}${r.stderr}` };
  }

  it('the service asks for notify, the daemon alone to be signalled (KillMode=process) and a stop timeout longer than the kill grace', () => {
    for (const file of [join(ROOT, 'docs/systemd/procctld.service'), join(ROOT, 'docs/systemd/user/procctld.service')]) {
      const k = keys(file);
      expect(k.get('Type'), file).toEqual(['notify']);
      // The daemon alone is signalled: it stops the sessions itself, and its crash leaves them to the next daemon (docs/durability.md).
      expect(k.get('KillMode'), file).toEqual(['process']);
      // A cgroup per session needs the service's subtree delegated (SPEC §15, docs/resources.md), writable.
      expect(k.get('Delegate'), file).toEqual(['yes']);
      expect(k.get('ProtectControlGroups'), file).toBeUndefined();
      const stop = k.get('TimeoutStopSec');
      expect(stop, file).toBeDefined();
      expect(seconds(stop![0]), `${file} TimeoutStopSec`).toBeGreaterThan(3);
      expect(k.get('ExecReload')?.[0], file).toMatch(/kill -USR2 \$MAINPID/);
      // The service serves the socket its socket unit listens on.
      const socketFile = file.replace(/\.service$/, '.socket');
      const listen = keys(socketFile).get('ListenStream')![0];
      expect(k.get('ExecStart')![0], file).toContain(`--socket ${listen}`);
    }
  });

  it.skipIf(!ANALYZE)(needs(ANALYZE, 'systemd-analyze', 'systemd-analyze verify accepts the system units (and rejects a broken copy)'), () => {
    const dir = tempDir('procctl-units-');
    for (const name of ['procctld.service', 'procctld.socket']) {
      const text = readFileSync(join(ROOT, 'docs/systemd', name), 'utf8')
        .replace(/^ExecStart=\S+/m, `ExecStart=${PROCCTLD}`)
        .replace(/^(User|SocketUser)=.*$/gm, `$1=${user}`)
        .replace(/^(Group|SocketGroup)=.*$/gm, `$1=${group}`);
      writeFileSync(join(dir, name), text);
    }
    const ok = verify([join(dir, 'procctld.service'), join(dir, 'procctld.socket')], false);
    expect(ok.status, ok.output).toBe(0);
    // Settings systemd ignores with a message are mistakes too.
    expect(ok.output).not.toMatch(/unknown|ignoring|deprecated/i);

    const broken = join(dir, 'broken', 'procctld.service');
    mkdirSync(join(dir, 'broken'));
    copyFileSync(join(dir, 'procctld.socket'), join(dir, 'broken', 'procctld.socket'));
    writeFileSync(broken, readFileSync(join(dir, 'procctld.service'), 'utf8').replace(/^ExecStart=\S+/m, 'ExecStart=bin/procctld'));
    const bad = verify([broken, join(dir, 'broken', 'procctld.socket')], false);
    expect(bad.status, bad.output).not.toBe(0);
  });

  it.skipIf(!ANALYZE)(needs(ANALYZE, 'systemd-analyze', 'systemd-analyze --user verify accepts the user units (and rejects a broken copy)'), () => {
    const dir = tempDir('procctl-user-units-');
    const runtime = join(dir, 'runtime');
    mkdirSync(runtime);
    chmodSync(runtime, 0o700);
    for (const name of readdirSync(join(ROOT, 'docs/systemd/user'))) {
      const text = readFileSync(join(ROOT, 'docs/systemd/user', name), 'utf8').replace('%h/.local/bin/procctld', PROCCTLD).replace('%h/.local/bin/procctl ', `${PROCCTL} `);
      writeFileSync(join(dir, name), text);
    }
    const files = readdirSync(join(ROOT, 'docs/systemd/user')).map((n) => join(dir, n));
    expect(files.map((f) => f.slice(dir.length + 1)).sort()).toEqual(['procctl-ui.service', 'procctld.service', 'procctld.socket']);
    const ok = verify(files, true, runtime);
    expect(ok.status, ok.output).toBe(0);
    expect(ok.output).not.toMatch(/unknown|ignoring|deprecated/i);

    mkdirSync(join(dir, 'broken'));
    copyFileSync(join(dir, 'procctld.socket'), join(dir, 'broken', 'procctld.socket'));
    writeFileSync(join(dir, 'broken', 'procctld.service'), readFileSync(join(dir, 'procctld.service'), 'utf8').replace(/^ExecStart=\S+/m, 'ExecStart=relative/procctld'));
    const bad = verify([join(dir, 'broken', 'procctld.service'), join(dir, 'broken', 'procctld.socket')], true, runtime);
    expect(bad.status, bad.output).not.toBe(0);
  });
});
