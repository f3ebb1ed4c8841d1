import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { BUNDLED, cliEntry } from './cli.js';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import type { Metric } from './lib/report.js';
import { median, now, round } from './lib/stats.js';

/**
 * Benchmark: CLI start-up as a user gets it, from the tarball installed globally into a prefix
 * (`npm pack`, then `npm install -g --prefix`), not from the checkout: `procctl ps --json` of the
 * installed package against `node -e 0`, in turn, round after round. An install sets file
 * times as it unpacks; the bundle's stamp, not those, decides whether the bundle runs, and the
 * figures say which ran. The dependencies come from npm's cache or the registry.
 */
export async function cliInstalled(opts: BenchOptions): Promise<Metric[]> {
  const rounds = opts.quick ? 8 : 20 * opts.rounds;
  const dir = mkdtempSync(join(tmpdir(), 'procctl-bench-installed-'));
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!/^npm_/i.test(k)) env[k] = v;
  const npm = (args: string[], cwd: string) => {
    const r = spawnSync('npm', args, { cwd, env, encoding: 'utf8' });
    if (r.status !== 0) throw new Error(`npm ${args.join(' ')} failed: ${(r.stderr || r.error?.message || '').trim().split('\n').slice(-3).join(' ')}`);
  };
  const daemon = await BenchDaemon.start();
  try {
    // Packed from a copy, so the pack's build does not rewrite the checkout's dist/: every file git
    // tracks but the tests, as the working tree has it, so whatever the build reads is there.
    const src = join(dir, 'src');
    mkdirSync(src);
    for (const file of trackedFiles()) {
      // A file deleted in the working tree is left out, as the tree has it.
      if (file.startsWith('test/') || !existsSync(join(ROOT, file))) continue;
      mkdirSync(dirname(join(src, file)), { recursive: true });
      cpSync(join(ROOT, file), join(src, file));
    }
    symlinkSync(join(ROOT, 'node_modules'), join(src, 'node_modules'));
    opts.log('cli-installed: npm pack, then npm install -g --prefix of the tarball');
    npm(['pack', '--pack-destination', dir], src);
    const tarball = join(dir, readdirSync(dir).find((f) => f.endsWith('.tgz'))!);
    const prefix = join(dir, 'prefix');
    npm(['install', '-g', '--prefix', prefix, '--no-audit', '--no-fund', '--prefer-offline', tarball], dir);
    const pkg = join(prefix, 'lib', 'node_modules', 'procctl');
    const entry = cliEntry(pkg);

    const client = await daemon.client();
    await client.call('exec', { command: 'sleep 600', background: true });
    client.close();
    const node = [process.execPath, '-e', '0'];
    const ps = [join(prefix, 'bin', 'procctl'), '--socket', daemon.socket, 'ps', '--json'];
    const run = (argv: string[]) => {
      const t0 = now();
      const r = spawnSync(argv[0], argv.slice(1), { stdio: ['ignore', 'ignore', 'pipe'] });
      const ms = now() - t0;
      if (r.status !== 0) throw new Error(`\`${argv.join(' ')}\` exited ${r.status ?? r.signal}: ${String(r.stderr).slice(0, 300)}`);
      return ms;
    };
    run(node);
    run(ps);
    const times = { node: [] as number[], ps: [] as number[] };
    opts.log(`cli-installed: ${rounds} rounds of \`node -e 0\` and the installed \`procctl ps --json\` (${entry})`);
    for (let r = 0; r < rounds; r++) {
      times.node.push(run(node));
      times.ps.push(run(ps));
    }
    const ratios = times.ps.map((t, i) => t / times.node[i]);
    return [
      { bench: 'cli-installed', name: 'node -e 0', value: round(median(times.node), 1), unit: 'ms', detail: 'the floor' },
      {
        bench: 'cli-installed',
        name: 'installed procctl ps --json',
        value: round(median(times.ps), 1),
        unit: 'ms',
        detail: `${entry === BUNDLED ? 'ran the bundle' : `ran ${entry}`}; from ${tarball.split('/').pop()} installed with npm install -g --prefix`,
      },
      { bench: 'cli-installed', name: 'installed ps --json / node -e 0', value: round(median(times.ps) / median(times.node), 2), unit: 'x', target: { op: '<=', value: 1.25 }, detail: `medians; per-round median ${round(median(ratios), 2)}x` },
    ];
  } finally {
    await daemon.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

/** The checkout's files as git tracks them (paths from its root). */
function trackedFiles(): string[] {
  try {
    return execFileSync('git', ['ls-files', '-z'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 }).split('\0').filter(Boolean);
  } catch (err) {
    throw new Error(`cli-installed packs a copy of the checkout's tracked files, and git ls-files failed in ${ROOT}: ${(err as Error).message}; run the bench from a git checkout`);
  }
}
