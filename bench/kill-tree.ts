import type { BenchOptions } from './lib/options.js';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import { alive, liveProcesses } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, round, sleep } from './lib/stats.js';

const CHILDREN = 100;
/** Every child ignores SIGTERM (inherited from the shell's trap), so only SIGKILL ends them. */
const COMMAND = `trap '' TERM; for i in $(seq ${CHILDREN}); do sleep 600 & done; echo ready; wait`;
const GRACE_MS = 200;

interface Run {
  /** Request sent → last process gone, as seen from /proc by the bench. */
  goneMs: number;
  /** Request sent → first process gone: the daemon's work before the signal, plus the request. */
  firstMs: number;
  /** Request sent → kill answered with the final record. */
  answerMs: number;
  /** Median gap between the bench's /proc looks: the resolution of goneMs. */
  lookMs: number;
}

/**
 * Benchmark: stopping a session with a tree of 100 processes that ignore SIGTERM. Nothing is
 * added to the daemon to time it from inside; the bench times from outside, from the moment it
 * sends `kill` to the moment the last of the 101 pids is gone from /proc (zombies count as gone):
 *
 * - `kill {signal: "SIGKILL", graceMs: 0}`: the whole stop path (request, stop file, /proc scan
 *   for escapees, SIGKILL to the group) — an upper bound on SIGKILL → gone;
 * - `kill {graceMs: 200}` (SIGTERM first, ignored): time to gone minus the grace, the SIGKILL
 *   phase as the daemon's escalation runs it.
 */
export async function killTree(opts: BenchOptions): Promise<Metric[]> {
  const runs = opts.quick ? 2 : Math.max(opts.rounds, 5);
  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  const cg = (await client.call('daemon.status')).cgroups;
  const how = cg.mode === 'none' ? `no cgroups (${cg.reason}): the process group and a /proc sweep` : `session cgroups (${cg.mode}), the kill by ${cg.kill}`;
  opts.log(`kill-tree: a session with ${CHILDREN} children ignoring SIGTERM; ${runs} kills with SIGKILL at once, ${runs} with SIGTERM + ${GRACE_MS} ms grace`);
  const direct: Run[] = [];
  const escalated: Run[] = [];
  try {
    for (let i = 0; i < runs; i++) {
      direct.push(await killOnce(client, { signal: 'SIGKILL', graceMs: 0 }, 'SIGKILL'));
      escalated.push(await killOnce(client, { graceMs: GRACE_MS }, 'SIGKILL'));
    }
    opts.log(
      `  SIGKILL at once: gone ${fmtList(direct.map((r) => r.goneMs))} ms (answered ${fmtList(direct.map((r) => r.answerMs))} ms); ` +
        `SIGTERM + grace: gone − grace ${fmtList(escalated.map((r) => r.goneMs - GRACE_MS))} ms`,
    );
  } finally {
    client.close();
    await daemon.stop();
  }

  const gone = direct.map((r) => r.goneMs);
  const spread = direct.map((r) => r.goneMs - r.firstMs);
  const afterGrace = escalated.map((r) => r.goneMs - GRACE_MS);
  const look = round(median(direct.map((r) => r.lookMs)), 1);
  return [
    {
      bench: 'kill-tree',
      name: `kill of a ${CHILDREN}-process tree, request → all gone`,
      value: median(gone),
      unit: 'ms',
      target: { op: '<', value: 50 },
      rounds: gone.map((v) => round(v, 1)),
      detail:
        `kill {signal:SIGKILL, graceMs:0} through ${how}: from the request to the last of ${CHILDREN + 1} pids gone in /proc (looked at every ${look} ms); an upper bound on SIGKILL → gone. ` +
        `Request → first pid gone ${round(median(direct.map((r) => r.firstMs)), 1)} ms (the request and the daemon's work before the signal); kill answered after ${round(median(direct.map((r) => r.answerMs)), 1)} ms`,
    },
    {
      bench: 'kill-tree',
      name: `kill of a ${CHILDREN}-process tree, first → last pid gone`,
      value: median(spread),
      unit: 'ms',
      rounds: spread.map((v) => round(v, 1)),
      detail: 'the SIGKILL phase as the kernel runs it: from the first process of the tree gone to the last (a lower bound on SIGKILL → all gone)',
    },
    {
      bench: 'kill-tree',
      name: `SIGKILL phase after a ${GRACE_MS} ms grace`,
      value: median(afterGrace),
      unit: 'ms',
      rounds: afterGrace.map((v) => round(v, 1)),
      detail: `kill {graceMs:${GRACE_MS}} of children that ignore SIGTERM: request → all gone, minus the grace (includes the daemon's polling for the group during the grace); answered after ${round(median(escalated.map((r) => r.answerMs)), 0)} ms`,
    },
  ];
}

async function killOnce(client: BenchClient, params: Record<string, unknown>, expectSignal: string): Promise<Run> {
  const r = await client.call('exec', { command: COMMAND, background: true });
  if (r.status !== 'running') throw new Error(`exec answered ${JSON.stringify(r).slice(0, 200)}`);
  const leader = r.pid as number;
  const group = new Set([leader]);
  // Wait until the job said ready and every child is up.
  const deadline = now() + 20_000;
  let pids: number[] = [];
  for (;;) {
    const p = await client.call('process', { action: 'poll', sessionId: r.sessionId });
    pids = liveProcesses({ pgrps: group }).map((x) => x.pid);
    if (p.output.includes('ready') || pids.length > CHILDREN) {
      if (pids.length === CHILDREN + 1) break;
    }
    if (now() > deadline) throw new Error(`only ${pids.length} of ${CHILDREN + 1} processes came up`);
    await sleep(20);
  }
  await sleep(100);

  let left = pids;
  const looks: number[] = [];
  const t0 = now();
  let answeredAt = Number.NaN;
  const answer = client.call('process', { action: 'kill', sessionId: r.sessionId, ...params }).then((rec) => {
    answeredAt = now();
    return rec;
  });
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
  const goneMs = now() - t0;
  const rec = await answer;
  if (rec.status !== 'failed' || rec.signal !== expectSignal) throw new Error(`kill answered ${JSON.stringify(rec).slice(0, 300)}`);
  await client.call('process', { action: 'clear', sessionId: r.sessionId });
  return { goneMs, firstMs, answerMs: answeredAt - t0, lookMs: median(looks) };
}

const fmtList = (xs: number[]) => xs.map((x) => Math.round(x)).join('/');
