import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROCCTL, ROOT, waitFor } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';
import { http } from '../console/console.js';

// `procctl daemon install --ui` (SPEC §17): the console's unit beside the daemon's. PID 1 here is
// not systemd, so the install prints its script; the units are checked by `systemd-analyze
// verify`, and both ExecStart lines are started by hand as systemd would (the daemon's, then the
// console's, with %t a runtime directory of the test's). In service mode the link never reaches
// stdout or stderr (the journal): it is in a 0600 file, renewed after each use.
const dir = mkdtempSync(join(tmpdir(), 'procctl-install-ui-'));
const dryRun = existsSync('/run/systemd/system') ? ['--dry-run'] : [];
const analyze = spawnSync('systemd-analyze', ['--version']).status === 0;
if (!analyze) console.warn('systemd-analyze is missing (Debian: apt-get install -y systemd; .ci/run installs it): the units are not verified');
const started = new Set<ChildProcess>();

afterAll(async () => {
  for (const p of started) {
    if (p.exitCode !== null || p.signalCode !== null) continue;
    const gone = new Promise((resolve) => p.once('exit', resolve));
    p.kill('SIGTERM');
    await gone;
  }
  rmSync(dir, { recursive: true, force: true });
});

function install(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [PROCCTL, 'daemon', 'install', ...args, ...dryRun], { encoding: 'utf8', env: { ...process.env, ...env } });
}

function unitsOf(script: string): Record<string, string> {
  const units: Record<string, string> = {};
  for (const m of script.matchAll(/^cat > (\S+) <<'PROCCTL_UNIT'\n([\s\S]*?)\nPROCCTL_UNIT$/gm)) units[m[1].split('/').pop()!] = `${m[2]}\n`;
  return units;
}

function verify(units: Record<string, string>, user: boolean) {
  const out = mkdtempSync(join(dir, 'units-'));
  for (const [name, text] of Object.entries(units)) writeFileSync(join(out, name), text);
  const runtime = mkdtempSync(join(dir, 'runtime-'));
  const files = ['procctld.socket', 'procctld.service', 'procctl-ui.service'].map((f) => join(out, f));
  const r = spawnSync('systemd-analyze', [...(user ? ['--user'] : []), 'verify', ...files], { encoding: 'utf8', env: { ...process.env, XDG_RUNTIME_DIR: runtime } });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
}

/** A TCP port nothing listens on now (the unit's port is fixed; the test's must not meet another run's). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

/** Start a unit's ExecStart as systemd would for a user unit: %t is the runtime directory, and $XDG_RUNTIME_DIR names it. */
function execStart(unit: string, runtime: string): { proc: ChildProcess; out: () => string } {
  const argv = unit.match(/^ExecStart=(.*)$/m)![1].replaceAll('%t', runtime).split(' ');
  const proc = spawn(argv[0], argv.slice(1), {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, XDG_RUNTIME_DIR: runtime, PROCCTL_STATE_DIR: join(runtime, 'state'), XDG_CONFIG_HOME: join(runtime, 'config') },
  });
  started.add(proc);
  let text = '';
  proc.stdout!.setEncoding('utf8').on('data', (s: string) => (text += s));
  proc.stderr!.setEncoding('utf8').on('data', (s: string) => (text += s));
  return { proc, out: () => text };
}

describe('procctl daemon install --user --ui', () => {
  let port = 0;
  let units: Record<string, string> = {};
  let script = '';
  beforeAll(async () => {
    port = await freePort();
    const r = install(['--user', '--ui', '--ui-port', String(port)], { XDG_CONFIG_HOME: join(dir, 'config') });
    expect(r.status, r.stderr).toBe(0);
    script = r.stdout;
    units = unitsOf(script);
  });

  it("adds procctl-ui.service, running this package's procctl ui as a service on the fixed port, after the daemon, and enables it", () => {
    expect(Object.keys(units).sort()).toEqual(['procctl-ui.service', 'procctld.service', 'procctld.socket']);
    const ui = units['procctl-ui.service'];
    expect(ui).toContain(`ExecStart=${process.execPath} ${join(ROOT, 'bin', 'procctl')} --socket %t/procctl/procctl.sock ui --service --port ${port}\n`);
    expect(ui).toContain('Requires=procctld.socket\n');
    expect(ui).toContain('After=procctld.socket procctld.service\n');
    expect(ui).toContain(`Documentation=file://${join(ROOT, 'docs', 'console.md')}\n`);
    expect(script.trimEnd().split('\n').slice(-3)).toEqual(['systemctl --user daemon-reload', 'systemctl --user enable --now procctld.socket', 'systemctl --user enable --now procctl-ui.service']);
  });

  it.skipIf(!analyze)('writes units systemd-analyze verify accepts', () => {
    verify(units, true);
  });

  it("serves the console with the unit's own ExecStart line; the link goes to a 0600 file, not to stdout or stderr, and each link works once", async () => {
    const runtime = mkdtempSync(join(dir, 'run-'));
    const daemon = execStart(units['procctld.service'], runtime);
    const socket = join(runtime, 'procctl', 'procctl.sock');
    const c = await waitFor(() => TestClient.connect(socket).catch(() => undefined), { what: 'the daemon of the unit to listen' });
    c.close();
    const ui = execStart(units['procctl-ui.service'], runtime);
    const file = join(runtime, 'procctl', 'ui.url');
    await waitFor(
      () => {
        if (ui.proc.exitCode !== null) throw new Error(`the console exited ${ui.proc.exitCode}: ${ui.out()}`);
        return existsSync(file) && ui.out().includes('\n');
      },
      { what: 'the console to write its link file' },
    );
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const first = readFileSync(file, 'utf8').trim();
    const token1 = new URL(first).searchParams.get('token')!;
    expect(first).toBe(`http://127.0.0.1:${port}/?token=${token1}`);
    expect(ui.out()).toContain(`http://127.0.0.1:${port}/`);
    expect(ui.out()).not.toContain('token');

    // `procctl ui --link` prints the file's link; the console then trades it once.
    const link = () => spawnSync(process.execPath, [PROCCTL, '--socket', socket, 'ui', '--link'], { encoding: 'utf8', env: { ...process.env, XDG_RUNTIME_DIR: runtime } });
    const l1 = link();
    expect(l1.status, l1.stderr).toBe(0);
    expect(l1.stdout).toBe(`${first}\n`);
    expect((await http(first)).status).toBe(303);
    const second = await waitFor(() => {
      const l = link().stdout.trim();
      return l !== first && l;
    }, { what: 'the link file to hold a fresh link' });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const spent = await http(first);
    expect(spent.status).toBe(403);
    // The refusal names where a service's next link is.
    expect(spent.body).toContain('procctl ui --link');
    const traded = await http(second);
    expect(traded.status).toBe(303);
    const cookie = String((traded.headers['set-cookie'] as string[])[0]).split(';')[0];
    expect((await http(`http://127.0.0.1:${port}/api/session`, { headers: { cookie } })).status).toBe(200);
    expect((await http(second)).status).toBe(403);
    expect(ui.out()).not.toContain(token1);
    expect(ui.out()).not.toContain(new URL(second).searchParams.get('token')!);

    // Stopped, it takes its link file with it.
    const gone = new Promise((resolve) => ui.proc.once('exit', resolve));
    ui.proc.kill('SIGTERM');
    await gone;
    expect(existsSync(file)).toBe(false);
    const none = link();
    expect(none.status).toBe(1);
    expect(none.stderr).toContain('no console runs as a service');
    const down = new Promise((resolve) => daemon.proc.once('exit', resolve));
    daemon.proc.kill('SIGTERM');
    await down;
  });
});

describe('procctl daemon install --system --ui', () => {
  it('prints a system unit for the console running as the procctl user, which systemd-analyze verify accepts', () => {
    const r = install(['--system', '--ui']);
    expect(r.status, r.stderr).toBe(0);
    const units = unitsOf(r.stdout);
    const ui = units['procctl-ui.service'];
    expect(ui).toContain(`ExecStart=${process.execPath} ${join(ROOT, 'bin', 'procctl')} --socket /run/procctl/procctl.sock ui --service --port 7787\n`);
    expect(ui).toContain('User=procctl\n');
    expect(r.stdout.trimEnd().split('\n').slice(-1)).toEqual(['systemctl enable --now procctl-ui.service']);
    if (analyze) verify(units, false);
  });

  it('refuses --ui-port without --ui, and a port that is not one', () => {
    const alone = install(['--user', '--ui-port', '8000']);
    expect(alone.status).toBe(2);
    expect(alone.stderr).toContain('--ui-port goes with --ui');
    const bad = install(['--user', '--ui', '--ui-port', '70000']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toContain('--ui-port takes a TCP port');
  });
});
