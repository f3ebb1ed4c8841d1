import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PROCCTL, ROOT, waitFor } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';

// `procctl daemon install` (SPEC §11). PID 1 here is not systemd, so it prints the script that
// would install the units; where systemd does run, --dry-run asks for the same. The script runs
// with a stand-in systemctl that records its arguments; the units it writes are checked by
// `systemd-analyze verify`, and their ExecStart is started for real.
const dir = mkdtempSync(join(tmpdir(), 'procctl-daemon-install-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const dryRun = existsSync('/run/systemd/system') ? ['--dry-run'] : [];
const analyze = spawnSync('systemd-analyze', ['--version']).status === 0;
if (!analyze) console.warn('systemd-analyze is missing (Debian: apt-get install -y systemd; .ci/run installs it): the units are not verified');

function install(args: string[], env: NodeJS.ProcessEnv = {}) {
  return spawnSync(process.execPath, [PROCCTL, 'daemon', 'install', ...args, ...dryRun], { encoding: 'utf8', env: { ...process.env, ...env } });
}

/** The here-documents of an install script, by file path. */
function unitsOf(script: string): Record<string, string> {
  const units: Record<string, string> = {};
  for (const m of script.matchAll(/^cat > (\S+) <<'PROCCTL_UNIT'\n([\s\S]*?)\nPROCCTL_UNIT$/gm)) units[m[1]] = `${m[2]}\n`;
  return units;
}

function verify(files: string[], user: boolean) {
  const runtime = mkdtempSync(join(dir, 'runtime-'));
  const r = spawnSync('systemd-analyze', [...(user ? ['--user'] : []), 'verify', ...files], { encoding: 'utf8', env: { ...process.env, XDG_RUNTIME_DIR: runtime } });
  expect(r.stderr).toBe('');
  expect(r.status).toBe(0);
}

describe('procctl daemon install --user', () => {
  const config = join(dir, 'config');
  const r = install(['--user'], { XDG_CONFIG_HOME: config });

  it('writes nothing where systemd is not running, and prints a script that installs the units and starts the socket', () => {
    expect(r.status, r.stderr).toBe(0);
    expect(r.stderr).toContain('nothing was written');
    expect(existsSync(config)).toBe(false);
    const bin = join(dir, 'bin');
    mkdirSync(bin, { recursive: true });
    const calls = join(dir, 'systemctl.log');
    writeFileSync(join(bin, 'systemctl'), `#!/bin/sh\necho "$*" >> ${calls}\n`);
    chmodSync(join(bin, 'systemctl'), 0o755);
    const sh = spawnSync('sh', ['-e'], { input: r.stdout, encoding: 'utf8', env: { ...process.env, PATH: `${bin}:${process.env.PATH}` } });
    expect(sh.status, sh.stderr).toBe(0);
    expect(readFileSync(calls, 'utf8')).toBe('--user daemon-reload\n--user enable --now procctld.socket\n');
    const unit = readFileSync(join(config, 'systemd', 'user', 'procctld.service'), 'utf8');
    // With the daemon's node flags, as bin/procctld's first line gives them (base/node-flags.ts).
    expect(unit).toContain(`ExecStart=${process.execPath} --min-semi-space-size=16 ${join(ROOT, 'bin', 'procctld')} --socket %t/procctl/procctl.sock\n`);
    expect(unit).toContain(`Documentation=file://${join(ROOT, 'docs', 'systemd.md')}\n`);
    expect(readFileSync(join(config, 'systemd', 'user', 'procctld.socket'), 'utf8')).toContain('ListenStream=%t/procctl/procctl.sock\n');
  });

  it.skipIf(!analyze)('writes units systemd-analyze verify accepts (it checks that ExecStart can run)', () => {
    verify(['procctld.socket', 'procctld.service'].map((f) => join(config, 'systemd', 'user', f)), true);
  });

  it("starts a daemon with the unit's own ExecStart line", async () => {
    const unit = readFileSync(join(config, 'systemd', 'user', 'procctld.service'), 'utf8');
    const runtime = mkdtempSync(join(dir, 'run-'));
    const argv = unit.match(/^ExecStart=(.*)$/m)![1].replaceAll('%t', runtime).split(' ');
    const d = spawn(argv[0], argv.slice(1), { stdio: 'ignore', env: { ...process.env, PROCCTL_STATE_DIR: join(runtime, 'state'), XDG_CONFIG_HOME: join(runtime, 'config') } });
    try {
      const c = await waitFor(() => TestClient.connect(join(runtime, 'procctl', 'procctl.sock')).catch(() => undefined), { what: 'the daemon of the unit to listen' });
      expect((await c.exec({ command: 'echo from-the-unit' })).output).toBe('from-the-unit\n');
      c.close();
    } finally {
      d.kill('SIGTERM');
      await new Promise((resolve) => (d.exitCode !== null ? resolve(null) : d.once('exit', resolve)));
    }
  });
});

describe('procctl daemon install --system', () => {
  it('prints units running this procctld as the procctl user, and the useradd that must come first when it is missing', () => {
    const r = install(['--system']);
    expect(r.status, r.stderr).toBe(0);
    const units = unitsOf(r.stdout);
    expect(Object.keys(units).sort()).toEqual(['/etc/systemd/system/procctld.service', '/etc/systemd/system/procctld.socket']);
    const service = units['/etc/systemd/system/procctld.service'];
    expect(service).toContain(`ExecStart=${process.execPath} --min-semi-space-size=16 ${join(ROOT, 'bin', 'procctld')} --socket /run/procctl/procctl.sock\n`);
    expect(service).toContain('User=procctl\n');
    const hasUser = readFileSync('/etc/passwd', 'utf8').split('\n').some((l) => l.startsWith('procctl:'));
    expect(r.stdout.includes('useradd --system --create-home --home-dir /home/procctl --shell /bin/bash procctl\n')).toBe(!hasUser);
    expect(r.stdout.trimEnd().split('\n').slice(-2)).toEqual(['systemctl daemon-reload', 'systemctl enable --now procctld.socket']);
    if (!analyze) return;
    const out = mkdtempSync(join(dir, 'system-'));
    for (const [path, text] of Object.entries(units)) writeFileSync(join(out, path.split('/').pop()!), text);
    verify([join(out, 'procctld.socket'), join(out, 'procctld.service')], false);
  });

  it('refuses --user with --system, and an unknown option, as usage errors', () => {
    const both = install(['--user', '--system']);
    expect(both.status).toBe(2);
    expect(both.stderr).toContain('--user and --system exclude each other');
    const unknown = install(['--root', '/x']);
    expect(unknown.status).toBe(2);
    expect(unknown.stderr).toContain("Unknown option '--root'");
    expect(unknown.stderr).toContain('usage: procctl daemon install [--user | --system] [--ui [--ui-port N]] [--dry-run]');
  });
});
