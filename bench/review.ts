import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import { describeFs, onJournaledExt4 } from './lib/filesystem.js';
import type { BenchOptions } from './lib/options.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round, sleep } from './lib/stats.js';

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
    const fs = describeFs(root);
    const execs = await execTrue(c, ws, opts, fs.text);
    const stat = await statOfMany(d, c, ws, opts);
    const npm = await npmCi(c, ws, cache, opts);
    // Every overlay mount makes about seven inodes in the state directory's file system (its work
    // directory and the kernel's probes); ext4 without a journal looks past every inode freed in
    // the last minutes for each one, so there the same exec also runs on an ext4 that journals.
    const journaled = fs.journal === false ? await onJournaledExt4(tmpdir(), (dir) => execTrueWithStateOn(dir, ws, opts)) : undefined;
    if (journaled && 'skipped' in journaled) opts.log(`review: exec of true with the state directory on a journaled ext4: skipped (${journaled.skipped})`);
    return [...execs, ...(journaled && !('skipped' in journaled) ? journaled : []), ...stat, ...npm];
  } finally {
    c.close();
    await d.stop();
    rmSync(root, { recursive: true, force: true });
  }
}

/** The exec of `true` with a daemon whose state directory (where review's overlays keep their upper and work directories) is in `dir`. */
async function execTrueWithStateOn(dir: string, ws: string, opts: BenchOptions): Promise<Metric[]> {
  const d = await BenchDaemon.start({ PROCCTL_STATE_DIR: join(dir, 'state') }, { sandbox: { mode: 'workspace-write', workspaces: [ws] } });
  const c = await d.client();
  try {
    return await execTrue(c, ws, opts, describeFs(dir).text);
  } finally {
    c.close();
    await d.stop();
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

async function execTrue(c: BenchClient, ws: string, opts: BenchOptions, fs: string): Promise<Metric[]> {
  const iterations = opts.quick ? 30 : 150;
  const warmup = opts.quick ? 5 : 20;
  opts.log(`review: exec of true in review vs direct mode (sandboxed; state directory on ${fs}); ${opts.rounds} rounds x ${iterations} iterations (+${warmup} warm-up)`);
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
  const p99s = (k: 'review' | 'direct') => round(median(rounds.map((s) => p99(s[k]))), 2);
  return [ratioMetric(`exec \`true\` in review mode / sandboxed exec in direct mode (state directory on ${fs}), median`, rounds, 1.15, (ms) => `${round(ms.review, 2)} ms (p99 ${p99s('review')})`, (ms) => `direct ${round(ms.direct, 2)} ms (p99 ${p99s('direct')})`)];
}

/**
 * `changes --stat` as a person asks it (the RPC, end to end: reading the upper directory, the
 * answer's 10,000 rows and its text) of a review session that wrote 10,000 files of its own in
 * 100 directories: the figure of SPEC §16's goal, where bench/changes.ts times the read alone.
 */
async function statOfMany(d: BenchDaemon, c: BenchClient, ws: string, opts: BenchOptions): Promise<Metric[]> {
  const dirs = opts.quick ? 20 : 100;
  const files = dirs * 100;
  const work = join(ws, 'many');
  mkdirSync(work);
  const r = await c.call('exec', { command: `for d in $(seq ${dirs}); do mkdir d$d; for f in $(seq 100); do echo "file $f" > d$d/f$f.txt; done; done`, workdir: work, changes: 'review', yieldMs: 600_000 });
  if (r.status !== 'completed' || r.changes?.files !== files + dirs) throw new Error(`the review job answered ${JSON.stringify(r).slice(0, 400)}`);
  const times: number[] = [];
  const asks = opts.quick ? 5 : 15;
  for (let i = 0; i < asks + 2; i++) {
    const t0 = now();
    const a = await c.call('process', { action: 'changes', sessionId: r.sessionId, stat: true });
    const ms = now() - t0;
    if (a.totals.files !== files + dirs) throw new Error(`changes --stat counted ${a.totals.files}`);
    if (i >= 2) times.push(ms);
  }
  const during = await othersDuringApply(d, c, r.sessionId, files + dirs, opts);
  await forget(c, r.sessionId);
  opts.log(`review: changes --stat of ${files} files (+${dirs} dirs) held by a session: median ${round(median(times), 1)} ms, p99 ${round(p99(times), 1)} ms over ${asks}`);
  return [
    ...during,
    {
      bench: 'review',
      name: `changes --stat of ${files} files held by a review session (RPC, end to end), median`,
      value: median(times),
      unit: 'ms',
      target: { op: '<=', value: 200 },
      rounds: times.map((x) => round(x, 1)),
      detail: `p99 ${round(p99(times), 1)} ms; the whole answer: the upper directory read, ${files + dirs} rows and their text`,
    },
  ];
}

/**
 * What another client waits while the 10,100 changes are applied and then undone: a second
 * connection asks `daemon.status` meanwhile, each 5 ms after the last was answered.
 * The apply and the undo read and write on the changes' thread (changes/thread.ts); on the
 * daemon's thread every one of those requests waited for the whole apply.
 */
/** How often the other client asks while an apply runs. */
const ASK_EVERY_MS = 5;

async function othersDuringApply(d: BenchDaemon, c: BenchClient, id: string, count: number, opts: BenchOptions): Promise<Metric[]> {
  const other = await d.client();
  const waits: number[] = [];
  const took: Record<string, number> = {};
  try {
    for (const action of ['apply', 'undo'] as const) {
      let done = false;
      const asking = (async () => {
        while (!done) {
          const t = await other.timed('daemon.status');
          if (typeof t.result?.version !== 'string') throw new Error(`daemon.status answered ${JSON.stringify(t.result).slice(0, 200)}`);
          waits.push(t.receivedMs);
          // A client that keeps asking (a console, an agent polling), not one that takes a core.
          await sleep(ASK_EVERY_MS);
        }
      })();
      const t0 = now();
      const a = await c.call('process', { action, sessionId: id });
      took[action] = now() - t0;
      done = true;
      await asking;
      const n = action === 'apply' ? a.applied?.length : a.restored?.length;
      if (n !== count) throw new Error(`${action} answered ${JSON.stringify(a).slice(0, 300)}`);
    }
  } finally {
    other.close();
  }
  const longest = Math.max(...waits);
  opts.log(`review: apply of ${count} changes ${round(took.apply, 0)} ms, undo ${round(took.undo, 0)} ms; another client's ${waits.length} daemon.status meanwhile (one every ${ASK_EVERY_MS} ms): p50 ${round(median(waits), 2)} ms, p99 ${round(p99(waits), 2)} ms, longest ${round(longest, 1)} ms`);
  return [
    {
      bench: 'review',
      name: `another client's request while ${count} changes are applied and undone, the longest wait`,
      value: round(longest, 1),
      unit: 'ms',
      target: { op: '<=', value: 20 },
      rounds: [round(median(waits), 2), round(p99(waits), 2)],
      detail: `${waits.length} daemon.status meanwhile, one ${ASK_EVERY_MS} ms after the last was answered: p50 ${round(median(waits), 2)} ms, p99 ${round(p99(waits), 2)} ms; apply ${round(took.apply, 0)} ms, undo ${round(took.undo, 0)} ms`,
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
  return [
    ratioMetric('`npm ci` in review mode / in direct mode, median', rounds, 1.3, (ms) => `${round(ms.review, 0)} ms`, (ms) => `direct ${round(ms.direct, 0)} ms; ${rounds[0]?.files ?? 0} paths held per review run (this package's lockfile, offline from a primed cache)`),
  ];
}

/** Review against direct, round by round: the median of the rounds' ratios, and what they were made of. */
function ratioMetric(name: string, rounds: { review: number[]; direct: number[] }[], target: number, review: (ms: { review: number; direct: number }) => string, direct: (ms: { review: number; direct: number }) => string): Metric {
  const ratio = rounds.map((s) => median(s.review) / median(s.direct));
  const ms = { review: median(rounds.map((s) => median(s.review))), direct: median(rounds.map((s) => median(s.direct))) };
  return { bench: 'review', name, value: median(ratio), unit: 'x', target: { op: '<=', value: target }, rounds: ratio.map((x) => round(x, 3)), detail: `review ${review(ms)}, ${direct(ms)}` };
}
