import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, waitFor } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';

// The newcomer's path: `npm pack`, then a global install of the tarball into a prefix, with and
// without install scripts, as npm 12 will do by default for dependencies. The installed procctl
// must run its one-file CLI (the stamp, not file times, says it is current) and its daemon the
// prebuilt addon (posix_spawn, sd_notify), with no compiler involved. The dependencies come from
// the registry: where it cannot be reached, the test says so and skips.
const PACK_PARTS = ['package.json', 'package-lock.json', 'tsconfig.json', 'src', 'web', 'bench', 'bin', 'scripts', 'native', 'binding.gyp', 'docs', '.env.example', 'LICENSE', 'README.md'];

/** npm without the variables of an npm running this test (npm test sets npm_config_* and more). */
function npmEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  return { ...env, ...extra };
}

function npm(args: string[], cwd: string, timeout = 300_000) {
  return spawnSync('npm', args, { cwd, encoding: 'utf8', env: npmEnv(), timeout });
}

const ping = npm(['ping'], tmpdir(), 30_000);
const offline = ping.status !== 0 ? `the npm registry cannot be reached (npm ping: ${(ping.stderr || ping.error?.message || `exit ${ping.status}`).trim().split('\n').pop()})` : '';
if (offline) console.warn(`skipping the install tests: ${offline}`);

const dir = mkdtempSync(join(tmpdir(), 'procctl-install-'));
let tarball = '';
const daemons = new Set<ChildProcess>();

beforeAll(() => {
  if (offline) return;
  // Packed from a copy: the pack builds (prepare, prepack), which must not rewrite this checkout's dist/ under other tests.
  const src = join(dir, 'src');
  mkdirSync(src);
  for (const part of PACK_PARTS) cpSync(join(ROOT, part), join(src, part), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(src, 'node_modules'));
  // Generous: the pack compiles the addon and the whole build, minutes on a loaded two-core machine.
  const r = npm(['pack', '--pack-destination', dir], src, 570_000);
  expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  tarball = join(dir, readdirSync(dir).find((f) => f.endsWith('.tgz'))!);
}, 600_000);

afterAll(async () => {
  for (const d of daemons) {
    if (d.exitCode !== null || d.signalCode !== null) continue;
    const gone = new Promise((resolve) => d.once('exit', resolve));
    d.kill('SIGTERM');
    await gone;
  }
  rmSync(dir, { recursive: true, force: true });
});

/** Install the tarball globally into a prefix of its own; returns the prefix and npm's output. */
function installGlobal(name: string, extra: string[]): { prefix: string; output: string } {
  const prefix = join(dir, name);
  const r = npm(['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline', ...extra, tarball], dir);
  expect(r.status, `${r.stdout}\n${r.stderr}`).toBe(0);
  return { prefix, output: `${r.stdout}${r.stderr}` };
}

/** Start the installed procctld on a socket of its own; returns a client. */
async function startInstalled(prefix: string): Promise<{ socket: string; client: TestClient }> {
  const run = mkdtempSync(join(dir, 'run-'));
  const socket = join(run, 'procctl.sock');
  const d = spawn(join(prefix, 'bin', 'procctld'), ['--socket', socket], {
    stdio: 'ignore',
    env: { ...npmEnv(), PROCCTL_STATE_DIR: join(run, 'state'), XDG_CONFIG_HOME: join(run, 'config'), PROCCTL_LOG_LEVEL: 'warn' },
  });
  daemons.add(d);
  const client = await waitFor(
    () => {
      if (d.exitCode !== null) throw new Error(`the installed procctld exited ${d.exitCode}`);
      return TestClient.connect(socket).catch(() => undefined);
    },
    { what: 'the installed procctld to listen' },
  );
  return { socket, client };
}

function procctl(prefix: string, args: string[]) {
  return spawnSync(join(prefix, 'bin', 'procctl'), args, { encoding: 'utf8', env: { ...npmEnv(), PROCCTL_CLI_REPORT: '1' }, cwd: dir });
}

describe.skipIf(Boolean(offline))('the packed tarball', () => {
  it('holds the prebuilt addon, the CLI bundle with its stamp, the console\'s page, the units and LICENSE; no bench output, soak data or source maps', () => {
    const r = spawnSync('tar', ['-tzf', tarball], { encoding: 'utf8' });
    const files = r.stdout.split('\n').filter(Boolean);
    expect(files).toContain('package/prebuilds/linux-x64/procctl.napi.glibc.node');
    for (const f of ['dist/src/cli/procctl.cjs', 'dist/src/cli/procctl.cjs.json', 'dist/src/cli/procctl.cjs.cache', 'dist/src/daemon/procctld.cjs', 'dist/src/daemon/procctld.cjs.json', 'dist/src/daemon/procctld.cjs.cache', 'dist/web/index.html', 'dist/web/app.js', 'dist/web/app.css', 'LICENSE', 'docs/systemd/procctld.service', 'docs/systemd/user/procctld.service', 'docs/systemd.md']) {
      expect(files).toContain(`package/${f}`);
    }
    expect(files.filter((f) => f.startsWith('package/dist/bench/') || f.endsWith('.map') || /soak\.(json|svg)$|bench-results/.test(f))).toEqual([]);
  });
});

describe.skipIf(Boolean(offline))('npm install -g of the tarball', () => {
  for (const [label, extra] of [
    ['with install scripts', []],
    ['with --ignore-scripts', ['--ignore-scripts']],
  ] as const) {
    describe(label, () => {
      let prefix = '';
      let socket = '';
      let client: TestClient;
      beforeAll(async () => {
        ({ prefix } = installGlobal(label.includes('ignore') ? 'noscripts' : 'scripts', [...extra]));
        ({ socket, client } = await startInstalled(prefix));
      }, 600_000);
      afterAll(() => client?.close());

      it('procctl ps --json runs the one-file CLI (the bundle), not the compiled sources', () => {
        const r = procctl(prefix, ['--socket', socket, 'ps', '--json']);
        expect(r.status, r.stderr).toBe(0);
        expect(r.stderr).toContain('running the bundle');
        expect(r.stderr).toContain('with its code cache');
        expect(JSON.parse(r.stdout).sessions).toEqual([]);
      });

      it('procctld runs its one-file bundle with its code cache: the install\'s new file times are checked by the stamp\'s hashes', () => {
        const r = spawnSync(join(prefix, 'bin', 'procctld'), ['--version'], { encoding: 'utf8', env: { ...npmEnv(), PROCCTL_DAEMON_REPORT: '1' }, cwd: dir });
        expect(r.status, r.stderr).toBe(0);
        expect(r.stderr).toMatch(/running the bundle .*procctld\.cjs with its code cache/);
      });

      it('the daemon starts jobs with the prebuilt addon (posix_spawn), and procctl status says so', async () => {
        const status = await client.call('daemon.status');
        expect(status.spawner, status.spawnerReason).toBe('posix_spawn');
        expect(existsSync(join(prefix, 'lib', 'node_modules', 'procctl', 'build'))).toBe(false);
        const r = procctl(prefix, ['--socket', socket, 'status']);
        expect(r.stdout).toContain('spawner:  posix_spawn');
        const run = procctl(prefix, ['--socket', socket, 'exec', '--', 'pwd']);
        expect(run.stdout).toBe(`${dir}\n`);
      });

      it("procctl ui serves the console's page from the package, nothing fetched elsewhere", async () => {
        const ui = spawn(join(prefix, 'bin', 'procctl'), ['--socket', socket, 'ui'], { stdio: ['ignore', 'pipe', 'pipe'], env: npmEnv() });
        let out = '';
        ui.stdout!.setEncoding('utf8').on('data', (s: string) => (out += s));
        try {
          await waitFor(() => out.includes('\n'), { what: 'procctl ui to print its link' });
          const link = new URL(out.trim());
          const traded = await fetch(link, { redirect: 'manual' });
          expect(traded.status).toBe(303);
          const cookie = String(traded.headers.get('set-cookie')).split(';')[0];
          for (const path of ['/', '/app.js', '/app.css']) {
            const r = await fetch(new URL(path, link), { headers: { cookie } });
            expect(r.status, path).toBe(200);
            expect((await r.text()).length, path).toBeGreaterThan(100);
          }
        } finally {
          ui.kill('SIGTERM');
        }
      });

      it('daemon install names the installed package, not a checkout', () => {
        const r = procctl(prefix, ['daemon', 'install', '--user', '--dry-run']);
        expect(r.status, r.stderr).toBe(0);
        expect(r.stdout).toContain(`ExecStart=${process.execPath} --min-semi-space-size=16 ${join(prefix, 'lib', 'node_modules', 'procctl', 'bin', 'procctld')} --socket %t/procctl/procctl.sock\n`);
      });
    });
  }
});
