import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchOptions } from './lib/options.js';
import type { Metric } from './lib/report.js';
import { median, now, round } from './lib/stats.js';
import { apply, plan, read } from '../src/changes/index.js';

/**
 * Review and undo (SPEC §16): reading an upper directory of 10,000 changed files (each compared
 * with the workspace by lstat), and applying them (plan, then each file written beside its
 * target, renamed over it, its original kept) against `cp -a` of the same upper directory into an
 * empty directory on the same filesystem, the least any apply must do. The upper directory is
 * made here (100 directories of 100 files of 1 KiB, a tenth of them replacing a workspace file):
 * the same layout a kernel's overlay leaves for added and modified files. Rounds alternate the
 * two, so load on a shared machine hits both alike.
 */
export async function changesCost(opts: BenchOptions): Promise<Metric[]> {
  const dirs = opts.quick ? 20 : 100;
  const perDir = 100;
  const files = dirs * perDir;
  const base = mkdtempSync(join(tmpdir(), 'procctl-bench-changes-'));
  const upper = join(base, 'upper');
  const lower = join(base, 'lower');
  const body = Buffer.alloc(1024, 'x');
  for (let d = 0; d < dirs; d++) {
    mkdirSync(join(upper, `d${d}`), { recursive: true });
    mkdirSync(join(lower, `d${d}`), { recursive: true });
    for (let f = 0; f < perDir; f++) {
      writeFileSync(join(upper, `d${d}`, `f${f}.txt`), body);
      if (f % 10 === 0) writeFileSync(join(lower, `d${d}`, `f${f}.txt`), 'old\n');
    }
  }
  opts.log(`changes: read and apply of ${files} files vs cp -a; ${opts.rounds} rounds`);
  const reads: number[] = [];
  const applies: number[] = [];
  const copies: number[] = [];
  try {
    for (let r = 0; r < opts.rounds + 1; r++) {
      const workspace = join(base, `ws${r}`);
      const copyTo = join(base, `cp${r}`);
      // Each round's workspace starts as the lower did, made outside the timing; being newer than
      // the upper directory its replaced files are conflicts, so the plan is forced.
      if (spawnSync('cp', ['-a', lower, workspace]).status !== 0) throw new Error('cp -a of the lower failed');
      const runs: (() => void)[] = [
        () => {
          // Each side starts with nothing of the other's still to be written back.
          spawnSync('sync');
          const t0 = now();
          const set = read(upper, workspace);
          const t1 = now();
          const done = apply(plan(set, workspace, { sessionStartMs: Date.now(), force: true }), { workspace, upper, originals: join(base, `orig${r}`) });
          const t2 = now();
          if (done.applied.length !== files || done.failed.length > 0) throw new Error(`apply wrote ${done.applied.length} of ${files} (${done.failed[0]?.why ?? ''})`);
          if (set.files.length !== files) throw new Error(`read found ${set.files.length} changes, not ${files}`);
          if (r > 0) {
            reads.push(t1 - t0);
            applies.push(t2 - t0);
          }
        },
        () => {
          spawnSync('sync');
          const t0 = now();
          const cp = spawnSync('cp', ['-a', `${upper}/.`, copyTo], { stdio: 'ignore' });
          const t1 = now();
          if (cp.status !== 0) throw new Error('cp -a failed');
          if (r > 0) copies.push(t1 - t0);
        },
      ];
      // The first round warms the page cache and is not counted.
      for (const run of r % 2 ? runs.reverse() : runs) run();
      rmSync(workspace, { recursive: true, force: true });
      rmSync(copyTo, { recursive: true, force: true });
      rmSync(join(base, `orig${r}`), { recursive: true, force: true });
    }
  } finally {
    rmSync(base, { recursive: true, force: true });
  }
  const ratio = median(copies) / median(applies);
  const detail = `median of ${opts.rounds}: read ${round(median(reads), 1)} ms, read+plan+apply ${round(median(applies), 1)} ms, cp -a ${round(median(copies), 1)} ms (${files} files of 1 KiB in ${dirs} dirs)`;
  opts.log(`changes: ${detail}`);
  return [
    { bench: 'changes', name: `read of ${files} changed files`, value: round(median(reads), 1), unit: 'ms', target: { op: '<=', value: 200 }, rounds: reads.map((v) => round(v, 1)) },
    { bench: 'changes', name: `apply speed vs cp -a (${files} files)`, value: round(ratio, 2), unit: 'x', target: { op: '>=', value: 0.5 }, rounds: applies.map((v) => round(v, 1)), detail },
  ];
}
