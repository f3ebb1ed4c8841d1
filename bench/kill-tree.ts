import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchOptions } from './lib/options.js';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import { alive, liveProcesses } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round, sleep } from './lib/stats.js';

const CHILDREN = 100;
/** Every child ignores SIGTERM (inherited from the shell's trap), so only SIGKILL ends them. */
const COMMAND = `trap '' TERM; for i in $(seq ${CHILDREN}); do sleep 600 & done; echo ready; wait`;
const GRACE_MS = 200;

interface Run {
  /** Request sent → last process gone, as seen from /proc by the bench. */
  goneMs: number;
  /** Request sent → first process gone: the daemon's work before the signal, plus the request. */
  firstMs: number;
  /** Request sent → kill answered with the final record (NaN for the floor, which has no answer). */
  answerMs: number;
  /** Median gap between the bench's /proc looks: the resolution of goneMs. */
  lookMs: number;
}

/**
 * Benchmark: stopping a session with a tree of 100 processes that ignore SIGTERM. Nothing is
 * added to the daemon to time it from inside; the bench times from outside, from the moment it
 * sends `kill` to the moment the last of the 101 pids is gone from /proc (zombies count as gone):
 *
 * - `kill {signal: "SIGKILL", graceMs: 0}`: the whole stop path (request, stop file, the kill of
 *   the session's cgroup or group) — an upper bound on SIGKILL → gone;
 * - `kill {graceMs: 200}` (SIGTERM first, ignored): time to gone minus the grace, the SIGKILL
 *   phase as the daemon's escalation runs it;
 * - the floor, in the same run: the same tree started by the bench itself in a process group of
 *   its own and sent SIGKILL by it, timed the same way (the kernel's part alone);
 * - where the bench can make a cgroup v2 directory: the same tree in a cgroup of the bench's own,
 *   ended by the bench's own write to its `cgroup.kill` (the kernel's part of the daemon's way of
 *   killing, with no daemon), to tell what the daemon adds from what the kernel's cgroup kill costs.
 *
 * Runs alternate the three, so load on a shared machine hits them alike; p50 and p99 of each.
 */
export async function killTree(opts: BenchOptions): Promise<Metric[]> {
  const runs = opts.quick ? 3 : Math.max(opts.rounds * 10, 20);
  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  const cg = (await client.call('daemon.status')).cgroups;
  const how = cg.mode === 'none' ? `no cgroups (${cg.reason}): the process group and a /proc sweep` : `session cgroups (${cg.mode}), the kill by ${cg.kill}`;
  opts.log(`kill-tree: a tree of ${CHILDREN} children ignoring SIGTERM, through ${how}; ${runs} kills each: SIGKILL at once, SIGTERM + ${GRACE_MS} ms grace, and the bench's own SIGKILL to the group (floor)`);
  const direct: Run[] = [];
  const escalated: Run[] = [];
  const floor: Run[] = [];
  const cgFloor: Run[] = [];
  const cgRoot = ownCgroup2();
  try {
    for (let i = 0; i < runs; i++) {
      direct.push(await killOnce(client, { signal: 'SIGKILL', graceMs: 0 }, 'SIGKILL'));
      escalated.push(await killOnce(client, { graceMs: GRACE_MS }, 'SIGKILL'));
      floor.push(await killBare());
      if (cgRoot) cgFloor.push(await killBare(cgRoot));
    }
    const ms = (xs: number[]) => `p50 ${round(median(xs), 1)} / p99 ${round(p99(xs), 1)} ms`;
    opts.log(
      `  SIGKILL at once: gone ${ms(direct.map((r) => r.goneMs))}, answered ${ms(direct.map((r) => r.answerMs))}; ` +
        `SIGTERM + grace: gone − grace ${ms(escalated.map((r) => r.goneMs - GRACE_MS))}; floor: gone ${ms(floor.map((r) => r.goneMs))}` +
        (cgRoot ? `; cgroup floor: gone ${ms(cgFloor.map((r) => r.goneMs))}` : `; no cgroup floor (${CGROUP_FLOOR_MISSING})`),
    );
  } finally {
    client.close();
    await daemon.stop();
  }

  const gone = direct.map((r) => r.goneMs);
  const answered = direct.map((r) => r.answerMs);
  const spread = direct.map((r) => r.goneMs - r.firstMs);
  const afterGrace = escalated.map((r) => r.goneMs - GRACE_MS);
  const afterGraceAnswered = escalated.map((r) => r.answerMs - GRACE_MS);
  const floorGone = floor.map((r) => r.goneMs);
  const look = round(median(direct.map((r) => r.lookMs)), 1);
  const p50 = (xs: number[]) => round(median(xs), 1);
  return [
    {
      bench: 'kill-tree',
      name: `kill of a ${CHILDREN}-process tree, request → all gone, p99`,
      value: p99(gone),
      unit: 'ms',
      target: { op: '<', value: 50 },
      rounds: gone.map((v) => round(v, 1)),
      detail:
        `p50 ${p50(gone)} ms; kill {signal:SIGKILL, graceMs:0} through ${how}: from the request to the last of ${CHILDREN + 1} pids gone in /proc (looked at every ${look} ms); an upper bound on SIGKILL → gone. ` +
        `Request → first pid gone p50 ${p50(direct.map((r) => r.firstMs))} ms. Floor (the bench's own SIGKILL to the group) p50 ${p50(floorGone)} / p99 ${round(p99(floorGone), 1)} ms`,
    },
    {
      bench: 'kill-tree',
      name: `kill of a ${CHILDREN}-process tree, request → answered, p99`,
      value: p99(answered),
      unit: 'ms',
      target: { op: '<', value: 50 },
      rounds: answered.map((v) => round(v, 1)),
      detail: `p50 ${p50(answered)} ms; the kill answers with the final record once the session has ended (nothing of it left, its leader reaped, its output closed)`,
    },
    {
      bench: 'kill-tree',
      name: `SIGKILL of the same tree by the bench itself (floor), → all gone, p99`,
      value: p99(floorGone),
      unit: 'ms',
      rounds: floorGone.map((v) => round(v, 1)),
      detail: `p50 ${p50(floorGone)} ms; no daemon: process.kill(-pgid, SIGKILL) on a tree the bench started, timed the same way, in the same run`,
    },
    ...(cgRoot
      ? [
          {
            bench: 'kill-tree',
            name: `cgroup.kill of the same tree by the bench itself (cgroup floor), → all gone, p99`,
            value: p99(cgFloor.map((r) => r.goneMs)),
            unit: 'ms',
            rounds: cgFloor.map((r) => round(r.goneMs, 1)),
            detail: `p50 ${p50(cgFloor.map((r) => r.goneMs))} ms; no daemon: the tree in a cgroup v2 directory the bench made, ended by its own write to cgroup.kill, timed the same way, in the same run`,
          } satisfies Metric,
        ]
      : []),
    {
      bench: 'kill-tree',
      name: `kill of a ${CHILDREN}-process tree, first → last pid gone, p99`,
      value: p99(spread),
      unit: 'ms',
      rounds: spread.map((v) => round(v, 1)),
      detail: `p50 ${p50(spread)} ms; the SIGKILL phase as the kernel runs it: from the first process of the tree gone to the last (a lower bound on SIGKILL → all gone)`,
    },
    {
      bench: 'kill-tree',
      name: `SIGKILL phase after a ${GRACE_MS} ms grace, p99`,
      value: p99(afterGrace),
      unit: 'ms',
      rounds: afterGrace.map((v) => round(v, 1)),
      detail: `p50 ${p50(afterGrace)} ms; kill {graceMs:${GRACE_MS}} of children that ignore SIGTERM: request → all gone, minus the grace; answered ${p50(afterGraceAnswered)} / ${round(p99(afterGraceAnswered), 1)} ms (p50 / p99) after the grace`,
    },
  ];
}

/** Until the tree of `group` is all up (the leader and every child); their pids. */
async function treeUp(group: number, ready: () => Promise<boolean>): Promise<number[]> {
  const deadline = now() + 20_000;
  for (;;) {
    const pids = liveProcesses({ pgrps: new Set([group]) }).map((x) => x.pid);
    if (pids.length === CHILDREN + 1 && (await ready())) return pids;
    if (now() > deadline) throw new Error(`only ${pids.length} of ${CHILDREN + 1} processes came up`);
    await sleep(20);
  }
}

/** From t0 until none of `pids` is alive: the time to the first and the last gone, and the look interval. */
async function timeGone(pids: number[], t0: number): Promise<{ goneMs: number; firstMs: number; lookMs: number }> {
  let left = pids;
  const looks: number[] = [];
  let last = t0;
  let firstMs = Number.NaN;
  while (left.length > 0) {
    await sleep(1);
    const t = now();
    looks.push(t - last);
    last = t;
    left = left.filter(alive);
    if (Number.isNaN(firstMs) && left.length < pids.length) firstMs = t - t0;
    if (t - t0 > 20_000) throw new Error(`${left.length} processes still alive 20 s after kill`);
  }
  return { goneMs: now() - t0, firstMs, lookMs: median(looks) };
}

async function killOnce(client: BenchClient, params: Record<string, unknown>, expectSignal: string): Promise<Run> {
  const r = await client.call('exec', { command: COMMAND, background: true });
  if (r.status !== 'running') throw new Error(`exec answered ${JSON.stringify(r).slice(0, 200)}`);
  let said = false;
  const pids = await treeUp(r.pid as number, async () => {
    said ||= (await client.call('process', { action: 'poll', sessionId: r.sessionId })).output.includes('ready');
    return said;
  });
  await sleep(100);

  const t0 = now();
  let answeredAt = Number.NaN;
  const answer = client.call('process', { action: 'kill', sessionId: r.sessionId, ...params }).then((rec) => {
    answeredAt = now();
    return rec;
  });
  const timed = await timeGone(pids, t0);
  const rec = await answer;
  if (rec.status !== 'failed' || rec.signal !== expectSignal) throw new Error(`kill answered ${JSON.stringify(rec).slice(0, 300)}`);
  await client.call('process', { action: 'clear', sessionId: r.sessionId });
  return { ...timed, answerMs: answeredAt - t0 };
}

let CGROUP_FLOOR_MISSING = '';

/** A cgroup v2 directory the bench may make children in (its own), or undefined, saying why. */
function ownCgroup2(): string | undefined {
  try {
    const mount = readFileSync('/proc/self/mountinfo', 'utf8').split('\n').find((l) => l.split(' - ')[1]?.startsWith('cgroup2 '));
    const own = readFileSync('/proc/self/cgroup', 'utf8').split('\n').find((l) => l.startsWith('0::'));
    if (!mount || !own) throw new Error('no cgroup v2 mount');
    const dir = join(mount.split(' ')[4], own.slice(3));
    rmdirSync(mkdtempSync(join(dir, 'procctl-bench-probe-')));
    return dir;
  } catch (err) {
    CGROUP_FLOOR_MISSING = (err as Error).message;
    return undefined;
  }
}

/**
 * The floor: the same tree, started by the bench in a group of its own and killed by it; cleaned
 * up by pid. With `cgroupRoot`, the tree runs in a new cgroup under it and is ended by the
 * bench's write to its cgroup.kill.
 */
async function killBare(cgroupRoot?: string): Promise<Run> {
  const cg = cgroupRoot ? mkdtempSync(join(cgroupRoot, 'procctl-bench-kill-')) : undefined;
  // The shell joins the cgroup before it forks anything, so every child is born in it.
  const script = cg ? `echo $$ > ${cg}/cgroup.procs && ${COMMAND}` : COMMAND;
  const child = spawn('/bin/sh', ['-c', script], { detached: true, stdio: ['ignore', 'pipe', 'ignore'] });
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  let said = false;
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (said ||= d.includes('ready')));
  const group = child.pid!;
  try {
    const pids = await treeUp(group, async () => said);
    await sleep(100);
    const t0 = now();
    if (cg) writeFileSync(join(cg, 'cgroup.kill'), '1');
    else process.kill(-group, 'SIGKILL');
    const timed = await timeGone(pids, t0);
    return { ...timed, answerMs: Number.NaN };
  } finally {
    for (const p of liveProcesses({ pgrps: new Set([group]) })) {
      try {
        process.kill(p.pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    await exited;
    if (cg) await removeCgroup(cg);
  }
}

/** Remove a cgroup the bench made, once the kernel has let its last (zombie) member go. */
async function removeCgroup(dir: string): Promise<void> {
  for (let i = 0; ; i++) {
    try {
      rmdirSync(dir);
      return;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EBUSY' || i > 200) throw err;
      await sleep(10);
    }
  }
}
