import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import type { BenchOptions } from './lib/options.js';
import { alive, liveProcesses, memoryKb } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, round, sleep } from './lib/stats.js';
import { dirname, join } from 'node:path';
import { DAEMON_NODE_FLAGS } from '../src/base/node-flags.js';

/**
 * Benchmark: a planned restart (SPEC §19) with sessions running, of every kind a restart carries:
 * half on terminals, some sandboxed with network by name (their channel and proxy), some in review
 * mode (sandboxed, their writes held), the rest on pipes. Each session prints a numbered
 * line with the time it printed it, ten times a second. Per round: ask `daemon.restart`, time it
 * until the new image answers `daemon.status`; then every session's output is read back whole:
 * every number once, in order (0 lost, 0 doubled), and the largest gap between two lines as the
 * jobs printed them. Beside it, in the same run, the floor: starting a bare Node and the daemon's
 * own image (`procctld --version`, which loads every module), which a restart cannot beat. After
 * one restart and after all of them: the daemon's RSS and descriptors.
 */
export async function restartCost(opts: BenchOptions): Promise<Metric[]> {
  const count = opts.quick ? 20 : 100;
  const rounds = opts.quick ? 3 : 10;
  const ws = mkdtempSync(join(tmpdir(), 'procctl-bench-restart-'));
  mkdirSync(join(ws, 'work'));
  // Unconfined sessions ask for elevated in a scope that allows it; the others are confined.
  const config = {
    sandbox: { mode: 'workspace-write', workspaces: [ws] },
    scopes: { host: { elevated: 'allow' }, net: { network: { allow: ['127.0.0.1'] } }, held: {} },
  };
  // At info, the new image logs where each restart's time went ("restart: serving again").
  const daemon = await BenchDaemon.start({ PROCCTL_MAX_SESSIONS: String(count * 2), PROCCTL_LOG_LEVEL: 'info' }, config);
  const client = await daemon.client();
  const operator = { scope: '*', approverToken: readFileSync(`${daemon.socket}.approver`, 'utf8').trim() };
  const kinds = { terminal: count / 2, sandboxed: count / 10, review: count / 10, pipes: count - count / 2 - count / 5 };
  opts.log(`restart: ${count} sessions printing 10 lines/s (${kinds.terminal} on terminals, ${kinds.sandboxed} sandboxed with network by name, ${kinds.review} in review mode, ${kinds.pipes} on pipes); ${rounds} planned restarts in a row`);
  const ids: string[] = [];
  const scopeOf = new Map<string, string>();
  const pids = new Set<number>();
  const took: number[] = [];
  const floors = { node: [] as number[], image: [] as number[] };
  const timelines: Timeline[] = [];
  let after1: Usage | undefined;
  let lost = 0;
  let doubled = 0;
  let maxGap = 0;
  let printer = '';
  try {
    printer = `exec bash -c 'exec 9< <(sleep 600); i=0; while :; do echo "$i $EPOCHREALTIME"; i=$((i+1)); read -t 0.1 -u 9; done'`;
    const kindOf = (i: number) => (i < kinds.terminal ? 'terminal' : i < kinds.terminal + kinds.sandboxed ? 'sandboxed' : i < kinds.terminal + kinds.sandboxed + kinds.review ? 'review' : 'pipes');
    for (let i = 0; i < count; i++) {
      const kind = kindOf(i);
      const how =
        kind === 'terminal'
          ? { scope: 'host', elevated: true, pty: true }
          : kind === 'pipes'
            ? { scope: 'host', elevated: true }
            : kind === 'sandboxed'
              ? { scope: 'net', workdir: join(ws, 'work') }
              : { scope: 'held', workdir: join(ws, 'work'), changes: 'review' };
      const r = await client.call('exec', { command: printer, background: true, name: `printer ${i} (${kind})`, ...how });
      ids.push(r.sessionId);
      scopeOf.set(r.sessionId, how.scope);
      pids.add(r.pid);
    }
    await sleep(1000);
    let c = client;
    for (let r = 0; r < rounds; r++) {
      const t0 = now();
      const asked = Date.now();
      await c.call('daemon.restart', operator);
      c.close();
      for (;;) {
        try {
          const probe = await daemon.client();
          const st = await probe.call('daemon.status');
          if (st.restarts.planned > r) {
            c = probe;
            break;
          }
          probe.close();
        } catch {
          // the new image answers soon
        }
        await sleep(5);
      }
      took.push(now() - t0);
      const timeline = await lastTimeline(daemon, asked);
      if (timeline) timelines.push(timeline);
      // The floor, in turn with the restart: a bare Node, and the daemon's own image started alone.
      floors.node.push(timeStart([process.execPath, '-e', '0']));
      floors.image.push(timeStart([process.execPath, ...DAEMON_NODE_FLAGS, join(ROOT, 'bin', 'procctld'), '--version']));
      if (r === 0) after1 = await settledUsage(daemon.pid);
      await sleep(500);
    }
    const end = await settledUsage(daemon.pid);
    for (const id of ids) {
      const log = await c.call('process', { action: 'log', sessionId: id, offset: 0, limit: 100_000, scope: scopeOf.get(id) });
      const lines = String(log.output).split('\n').filter((l) => l !== '');
      let expect = 0;
      let last: number | undefined;
      for (const line of lines) {
        const [n, at] = line.split(' ');
        const k = Number(n);
        if (k < expect) doubled++;
        else if (k > expect) lost += k - expect;
        expect = Math.max(expect, k + 1);
        const t = Number(at) * 1000;
        if (last !== undefined) maxGap = Math.max(maxGap, t - last);
        last = t;
      }
    }
    for (const scope of ['host', 'net', 'held']) await c.call('process', { action: 'kill', all: true, scope });
    c.close();
    const nodeFloor = median(floors.node);
    const imageFloor = median(floors.image);
    opts.log(`  restart ${round(median(took))} ms median (${took.map((t) => round(t)).join(', ')}); floor: node -e 0 ${round(nodeFloor)} ms, procctld --version ${round(imageFloor)} ms; lost ${lost}, doubled ${doubled}, largest gap ${round(maxGap)} ms`);
    const steps = medianSteps(timelines);
    opts.log(`  where the time went, median of each step (ms): ${Object.entries(steps.steps).map(([k, v]) => `${k} ${v}`).join(', ')}; the new image's CPU until it served ${steps.imageCpuMs} ms (by step: ${Object.entries(steps.cpu).map(([k, v]) => `${k} ${v}`).join(', ')})`);
    opts.log(`  after 1 restart: RSS ${after1?.rss} kB, ${after1?.fds} fds; after ${rounds}: RSS ${end.rss} kB, ${end.fds} fds`);
    return [
      { bench: 'restart', name: `planned restart with ${count} sessions (half on terminals, sandboxed, review): request to answered again, median`, value: round(median(took)), unit: 'ms', target: { op: '<=', value: 1000 }, rounds: took.map((t) => round(t)), detail: `floor in the same run: node -e 0 ${round(nodeFloor)} ms, procctld --version ${round(imageFloor)} ms` },
      { bench: 'restart', name: 'planned restart / starting the daemon image alone (procctld --version)', value: round(median(took) / imageFloor), unit: 'x' },
      { bench: 'restart', name: 'planned restart: CPU the new image used from the exec until it served, median', value: steps.imageCpuMs, unit: 'ms', detail: `steps (ms, median): ${JSON.stringify(steps.steps)}; CPU by step (ms, median): ${JSON.stringify(steps.cpu)}` },
      { bench: 'restart', name: 'lines lost or doubled across all restarts', value: lost + doubled, unit: 'lines', target: { op: '<=', value: 0 } },
      { bench: 'restart', name: 'largest gap between two lines a job printed', value: round(maxGap), unit: 'ms', target: { op: '<=', value: 1000 } },
      { bench: 'restart', name: `daemon RSS after ${rounds} restarts / after 1`, value: round(end.rss / (after1?.rss ?? end.rss)), unit: 'x', target: { op: '<=', value: 1.25 } },
      { bench: 'restart', name: `daemon descriptors after ${rounds} restarts - after 1`, value: end.fds - (after1?.fds ?? end.fds), unit: 'fds', target: { op: '<=', value: 0 }, detail: `by kind: ${after1 ? fdDiff(after1, end) : 'none'}; each count once three samples 600 ms apart agreed` },
      ...(await crashCost(opts, count, printer)),
    ];
  } finally {
    client.close();
    await daemon.stop();
    rmSync(ws, { recursive: true, force: true });
    for (const pid of new Set([...pids].filter(alive).concat(liveProcesses({ pgrps: pids }).map((p) => p.pid)))) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

/**
 * The same sessions through a crash (SPEC §19, durability.onCrash "keep"): the daemon is SIGKILLed
 * and a new one started at once on the same state directory and socket; timed from the kill until
 * the new daemon answers having adopted every session. Then, as for the planned restart, every
 * session's output read back whole (lost, doubled, the largest gap as the jobs printed), and the
 * last daemon's RSS and descriptors against the first one's with the same sessions.
 */
async function crashCost(opts: BenchOptions, count: number, printer: string): Promise<Metric[]> {
  const rounds = opts.quick ? 2 : 5;
  const env = { PROCCTL_MAX_SESSIONS: String(count * 2), PROCCTL_ON_CRASH: 'keep' };
  let daemon = await BenchDaemon.start(env);
  let c = await daemon.client();
  opts.log(`restart: the same ${count} sessions through ${rounds} crashes (SIGKILL), a new daemon started at once each time`);
  const ids: string[] = [];
  const pids = new Set<number>();
  const took: number[] = [];
  /** When each crash happened (ms since the epoch, the jobs' clock). */
  const kills: number[] = [];
  let lost = 0;
  /** Of the lines lost, those around the instant of a crash (the lines either side straddle it). */
  let lostAtKill = 0;
  let doubled = 0;
  let maxGap = 0;
  try {
    for (let i = 0; i < count; i++) {
      const r = await c.call('exec', { command: printer, background: true, name: `printer ${i}` });
      ids.push(r.sessionId);
      pids.add(r.pid);
    }
    // Every session's first record (at ~100 ms, later on a loaded machine) gives the guardian its
    // descriptors: the crash waits for all of them, or one not yet kept is (rightly) lost.
    await firstRecords(daemon, ids);
    const before = await settledUsage(daemon.pid);
    /** The daemon that adopted the sessions after the first crash: what the later ones are held to (the issue: as after one). */
    let afterOne = before;
    for (let r = 0; r < rounds; r++) {
      c.close();
      const t0 = now();
      kills.push(Date.now());
      await daemon.crash();
      daemon = await BenchDaemon.start(env, undefined, daemon);
      c = await daemon.client();
      const st = await c.call('daemon.status');
      took.push(now() - t0);
      if (st.restarts.adopted !== count) throw new Error(`the new daemon adopted ${st.restarts.adopted} of ${count} sessions (lost ${st.restarts.lost}): ${daemon.log}`);
      await sleep(1000);
      if (r === 0) afterOne = await settledUsage(daemon.pid);
    }
    const end = await settledUsage(daemon.pid);
    for (const id of ids) {
      const log = await c.call('process', { action: 'log', sessionId: id, offset: 0, limit: 100_000 });
      const lines = String(log.output).split('\n').filter((l) => l !== '');
      let expect = 0;
      let last: number | undefined;
      for (const line of lines) {
        const [n, at] = line.split(' ');
        const k = Number(n);
        const t = Number(at) * 1000;
        if (k < expect) doubled++;
        else if (k > expect) {
          lost += k - expect;
          // Lines missing where a crash falls between the two printed either side: read by the dying daemon, not yet in its spool.
          if (last !== undefined && kills.some((kill) => last! <= kill && kill <= t)) lostAtKill += k - expect;
        }
        expect = Math.max(expect, k + 1);
        if (last !== undefined) maxGap = Math.max(maxGap, t - last);
        last = t;
      }
    }
    await c.call('process', { action: 'kill', all: true });
    opts.log(`  crash to adopted ${round(median(took))} ms median (${took.map((t) => round(t)).join(', ')}); lost ${lost} (${lostAtKill} at the instant of a crash, ${lost - lostAtKill} elsewhere), doubled ${doubled}, largest gap ${round(maxGap)} ms`);
    opts.log(`  first daemon with the sessions: RSS ${before.rss} kB, ${before.fds} fds; after 1 crash: RSS ${afterOne.rss} kB, ${afterOne.fds} fds; after ${rounds} crashes, the last: RSS ${end.rss} kB, ${end.fds} fds`);
    return [
      { bench: 'restart', name: `crash (SIGKILL) with ${count} sessions, new daemon started at once: kill to adopted and answering, median`, value: round(median(took)), unit: 'ms', rounds: took.map((t) => round(t)) },
      { bench: 'restart', name: 'lines lost (away from the instant of a crash) or doubled across all crashes', value: lost - lostAtKill + doubled, unit: 'lines', target: { op: '<=', value: 0 } },
      { bench: 'restart', name: 'lines the dying daemon had read and not yet spooled (at the instant of a crash)', value: lostAtKill, unit: 'lines', detail: `of ${count} sessions x ${rounds} crashes, 10 lines/s each` },
      { bench: 'restart', name: 'largest gap between two lines a job printed, across crashes', value: round(maxGap), unit: 'ms' },
      { bench: 'restart', name: `daemon RSS after ${rounds} crashes / after 1`, value: round(end.rss / afterOne.rss), unit: 'x', target: { op: '<=', value: 1.25 }, detail: `the daemon that spawned the sessions: ${before.rss} kB; after 1 crash ${afterOne.rss} kB (${round(afterOne.rss / before.rss)}x of it)` },
      { bench: 'restart', name: `daemon descriptors after ${rounds} crashes - after 1`, value: end.fds - afterOne.fds, unit: 'fds', target: { op: '<=', value: 0 }, detail: `by kind: ${fdDiff(afterOne, end)}; the daemon that spawned the sessions: ${before.fds}` },
    ];
  } finally {
    c.close();
    await daemon.stop();
    for (const pid of new Set([...pids].filter(alive).concat(liveProcesses({ pgrps: pids }).map((p) => p.pid)))) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

interface Timeline {
  steps: Record<string, number>;
  imageCpuMs?: number;
  /** The new image's CPU by step (from the exec). */
  cpu?: Record<string, number>;
}

/** The timeline the daemon logged for the restart asked at `since` ("restart: serving again", docs/durability.md); waits for it a while. */
async function lastTimeline(daemon: BenchDaemon, since: number): Promise<Timeline | undefined> {
  for (let i = 0; i < 100; i++) {
    const lines = daemon.log.split('\n').filter((l) => l.includes('"restart: serving again"'));
    const last = lines.at(-1);
    if (last) {
      const t = JSON.parse(last) as Timeline & { time: number };
      if (t.time >= since) return t;
    }
    await sleep(20);
  }
  return undefined;
}

/** Each step's median over the restarts, in the order the steps came. */
function medianSteps(all: Timeline[]): { steps: Record<string, number>; imageCpuMs: number; cpu: Record<string, number> } {
  const steps: Record<string, number> = {};
  for (const name of Object.keys(all[0]?.steps ?? {})) steps[name] = round(median(all.map((t) => t.steps[name] ?? 0)));
  const cpu: Record<string, number> = {};
  for (const name of Object.keys(all[0]?.cpu ?? {})) cpu[name] = round(median(all.map((t) => t.cpu?.[name] ?? 0)));
  return { steps, imageCpuMs: round(median(all.map((t) => t.imageCpuMs ?? 0))), cpu };
}

function timeStart(argv: string[]): number {
  const t0 = now();
  execFileSync(argv[0], argv.slice(1), { stdio: 'ignore' });
  return now() - t0;
}

interface Usage {
  rss: number;
  fds: number;
  /** The descriptors by kind (`socket`, `pipe`, `anon_inode:[eventfd]`, a file's directory): what a difference is made of. */
  kinds: Map<string, number>;
}

function usage(pid: number): Usage {
  const kinds = new Map<string, number>();
  const names = readdirSync(`/proc/${pid}/fd`);
  for (const fd of names) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fd}`);
    } catch {
      continue; // closed since the listing
    }
    const kind = /^(socket|pipe):/.exec(target)?.[1] ?? (target.startsWith('/') ? dirname(target) : target);
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
  return { rss: memoryKb(pid)?.rss ?? 0, fds: names.length, kinds };
}

/**
 * A daemon's usage once its descriptors have settled: the same count three samples in a row,
 * 600 ms apart (at most 8 s): one sample can catch a connection being accepted or a record
 * being written, which is not a leak; and a new image's samplers' thread starts at its first
 * refresh, a second after its first samples are held (runner/sample-thread.ts), its event loop's
 * four descriptors with it: 200 ms apart, the count after the first restart was taken before it.
 */
async function settledUsage(pid: number): Promise<Usage> {
  let last = usage(pid);
  let same = 0;
  for (const deadline = Date.now() + 8000; same < 2 && Date.now() < deadline; ) {
    await sleep(600);
    const next = usage(pid);
    same = next.fds === last.fds ? same + 1 : 0;
    last = next;
  }
  return last;
}

/** Which kinds of descriptor differ between two usages, e.g. "+1 socket, -1 /tmp/x". */
function fdDiff(from: Usage, to: Usage): string {
  const out: string[] = [];
  for (const kind of new Set([...from.kinds.keys(), ...to.kinds.keys()])) {
    const d = (to.kinds.get(kind) ?? 0) - (from.kinds.get(kind) ?? 0);
    if (d !== 0) out.push(`${d > 0 ? '+' : ''}${d} ${kind}`);
  }
  return out.join(', ') || 'none';
}

/** Wait (up to a minute) until each session's first record, with its leader's start time, is on disk. */
async function firstRecords(daemon: BenchDaemon, ids: string[]): Promise<void> {
  const dir = join(daemon.env.PROCCTL_STATE_DIR!, 'sessions');
  const written = (id: string) => {
    try {
      return (JSON.parse(readFileSync(join(dir, `${id}.json`), 'utf8')) as { pidStartTime?: number }).pidStartTime !== undefined;
    } catch {
      return false;
    }
  };
  const deadline = Date.now() + 60_000;
  for (let left = ids; left.length > 0; left = left.filter((id) => !written(id))) {
    if (Date.now() > deadline) throw new Error(`${left.length} of ${ids.length} sessions have no first record after a minute`);
    await sleep(50);
  }
}
