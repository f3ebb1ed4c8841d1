import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import type { BenchOptions } from './lib/options.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round } from './lib/stats.js';

/**
 * What review mode costs (SPEC §16, issue 27): a sandboxed exec of `true` with its workspace on
 * an overlay against the same in direct mode, and `npm ci` of a real project (this package's own
 * lockfile, from a primed cache, no network) held for review against written straight in. One
 * daemon, the two modes alternating, so load hits them alike.
 */
export async function reviewCost(opts: BenchOptions): Promise<Metric[]> {
  const root = mkdtempSync(join(tmpdir(), 'procctl-bench-review-'));
  const ws = join(root, 'ws');
  const cache = join(root, 'npm-cache');
  mkdirSync(ws);
  mkdirSync(cache);
  const d = await BenchDaemon.start({}, { sandbox: { mode: 'workspace-write', workspaces: [ws], writable: [cache] } });
  const c = await d.client();
  try {
    const execs = await execTrue(c, ws, opts);
    const npm = await npmCi(c, ws, cache, opts);
    return [...execs, ...npm];
  } finally {
    c.close();
    await d.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

async function run(c: BenchClient, params: Record<string, unknown>): Promise<{ ms: number; id: string }> {
  const t0 = now();
  const r = await c.call('exec', { yieldMs: 120_000, ...params });
  const ms = now() - t0;
  if (r.status !== 'completed' || r.exitCode !== 0) throw new Error(`exec answered ${JSON.stringify(r).slice(0, 400)}`);
  return { ms, id: r.sessionId };
}

/** Forget a session, and whatever changes it holds (untimed). */
const forget = (c: BenchClient, id: string) => c.call('process', { action: 'remove', sessionId: id, discard: true });

async function execTrue(c: BenchClient, ws: string, opts: BenchOptions): Promise<Metric[]> {
  const iterations = opts.quick ? 30 : 150;
  const warmup = opts.quick ? 5 : 20;
  opts.log(`review: exec of true in review vs direct mode (sandboxed); ${opts.rounds} rounds x ${iterations} iterations (+${warmup} warm-up)`);
  const rounds: { direct: number[]; review: number[] }[] = [];
  for (let r = 0; r < opts.rounds; r++) {
    const s = { direct: [] as number[], review: [] as number[] };
    for (let i = 0; i < warmup + iterations; i++) {
      const order: ('direct' | 'review')[] = i % 2 === 0 ? ['direct', 'review'] : ['review', 'direct'];
      for (const mode of order) {
        const { ms, id } = await run(c, { command: 'true', workdir: ws, changes: mode });
        if (i >= warmup) s[mode].push(ms);
        await forget(c, id);
      }
    }
    rounds.push(s);
    opts.log(`  round ${r + 1}: review ${round(median(s.review), 2)} ms, direct ${round(median(s.direct), 2)} ms`);
  }
  const ratio = rounds.map((s) => median(s.review) / median(s.direct));
  return [
    {
      bench: 'review',
      name: 'exec `true` in review mode / sandboxed exec in direct mode, median',
      value: median(ratio),
      unit: 'x',
      target: { op: '<=', value: 1.15 },
      rounds: ratio.map((x) => round(x, 3)),
      detail: `review ${round(median(rounds.map((s) => median(s.review))), 2)} ms (p99 ${round(median(rounds.map((s) => p99(s.review))), 2)}), direct ${round(median(rounds.map((s) => median(s.direct))), 2)} ms (p99 ${round(median(rounds.map((s) => p99(s.direct))), 2)})`,
    },
  ];
}

async function npmCi(c: BenchClient, ws: string, cache: string, opts: BenchOptions): Promise<Metric[]> {
  const project = join(ws, 'project');
  mkdirSync(project);
  copyFileSync(join(ROOT, 'package.json'), join(project, 'package.json'));
  copyFileSync(join(ROOT, 'package-lock.json'), join(project, 'package-lock.json'));
  // The cache is filled once outside the sandbox; the timed runs are offline.
  execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--cache', cache], { cwd: project, stdio: 'ignore' });
  rmSync(join(project, 'node_modules'), { recursive: true, force: true });
  const command = `npm ci --ignore-scripts --offline --no-audit --no-fund --cache ${cache}`;
  const times = opts.quick ? 1 : 2;
  opts.log(`review: npm ci of this package's lockfile in review vs direct mode; ${opts.rounds} rounds x ${times}`);
  const rounds: { direct: number[]; review: number[]; files: number }[] = [];
  for (let r = 0; r < opts.rounds; r++) {
    const s = { direct: [] as number[], review: [] as number[], files: 0 };
    for (let i = 0; i < times; i++) {
      for (const mode of (i + r) % 2 === 0 ? (['direct', 'review'] as const) : (['review', 'direct'] as const)) {
        const { ms, id } = await run(c, { command, workdir: project, changes: mode });
        s[mode].push(ms);
        if (mode === 'review') s.files = (await c.call('process', { action: 'changes', sessionId: id, stat: true })).totals.files;
        await forget(c, id);
        rmSync(join(project, 'node_modules'), { recursive: true, force: true });
      }
    }
    rounds.push(s);
    opts.log(`  round ${r + 1}: review ${round(median(s.review), 0)} ms (${s.files} paths held), direct ${round(median(s.direct), 0)} ms`);
  }
  const ratio = rounds.map((s) => median(s.review) / median(s.direct));
  return [
    {
      bench: 'review',
      name: '`npm ci` in review mode / in direct mode, median',
      value: median(ratio),
      unit: 'x',
      target: { op: '<=', value: 1.3 },
      rounds: ratio.map((x) => round(x, 3)),
      detail: `review ${round(median(rounds.map((s) => median(s.review))), 0)} ms, direct ${round(median(rounds.map((s) => median(s.direct))), 0)} ms; ${rounds[0]?.files ?? 0} paths held per review run (this package's lockfile, offline from a primed cache)`,
    },
  ];
}
