import type { BenchOptions } from './lib/options.js';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import { exitWaits } from './lib/sessions.js';
import { cpuMs, memoryKb, resetPeakRss } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { runLikeDaemon } from './lib/shell.js';
import { median, now, round, sleep } from './lib/stats.js';

const GiB = 1024 * 1024 * 1024;

interface Round {
  daemonMs: number;
  bareMs: number;
  /** CPU time (user + system) the daemon used for the capture, and the bench process for the bare read. */
  daemonCpuMs: number;
  bareCpuMs: number;
  /** How long after the exit event the daemon kept using CPU. */
  settleMs: number;
  devNullMs: number;
  catMs: number;
  rssBeforeKb: number;
  rssAfterKb: number;
  peakKb: number;
  captured: number | undefined;
}

/**
 * Benchmark 2: capture of a large stdout. The daemon runs the command backgrounded and the bench
 * waits for its `exited` event; the baselines run the same command in the same round: a bare
 * Node reader (spawn, read, discard), the command into /dev/null, and through `| cat`.
 */
export async function capture(opts: BenchOptions): Promise<Metric[]> {
  const bytes = opts.quick ? GiB / 8 : GiB;
  const roundsWanted = opts.quick ? opts.rounds : Math.max(opts.rounds, 5);
  const command = `head -c ${bytes} /dev/zero`;
  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  const waitExit = await exitWaits(client);
  // Growth is measured from the fresh daemon's RSS, before any capture (the warm-up included).
  const idleRssKb = memoryKb(daemon.pid)!.rss;
  opts.log(`capture: \`${command}\` (${round(bytes / 2 ** 20, 0)} MiB); ${roundsWanted} rounds`);

  const rounds: Round[] = [];
  try {
    // Warm-up: a small capture, so the first round does not pay for code loading and JIT.
    const warm = await viaDaemon(client, `head -c ${4 * 2 ** 20} /dev/zero`);
    await untilIdle(daemon.pid);
    await countAndClear(client, warm.sessionId);
    for (let r = 0; r < roundsWanted; r++) {
      const order = r % 2 === 0 ? ['daemon', 'bare'] : ['bare', 'daemon'];
      const round_: Partial<Round> = {};
      for (const which of order) {
        if (which === 'bare') {
          const cpu0 = process.cpuUsage();
          const run = await runLikeDaemon(daemon.env, command);
          const cpu = process.cpuUsage(cpu0);
          if (run.bytes !== bytes) throw new Error(`bare reader read ${run.bytes} bytes, expected ${bytes}`);
          round_.bareMs = run.ms;
          round_.bareCpuMs = (cpu.user + cpu.system) / 1000;
        } else {
          resetPeakRss(daemon.pid);
          const before = memoryKb(daemon.pid)!;
          const cpu0 = cpuMs(daemon.pid);
          const run = await viaDaemon(client, command);
          // Work the daemon still does after the exit (e.g. writing out buffered output) belongs
          // to this capture: wait until it is idle, so the next round starts clean.
          const settleMs = await untilIdle(daemon.pid);
          const daemonCpuMs = cpuMs(daemon.pid) - cpu0;
          const after = memoryKb(daemon.pid)!;
          const peakKb = Math.max(after.hwm, run.peakRssKb);
          const captured = await countAndClear(client, run.sessionId);
          Object.assign(round_, { daemonMs: run.ms, daemonCpuMs, settleMs, peakKb, captured, rssBeforeKb: before.rss, rssAfterKb: after.rss });
        }
      }
      round_.devNullMs = (await runLikeDaemon(daemon.env, `${command} > /dev/null`, 'ignore')).ms;
      round_.catMs = (await runLikeDaemon(daemon.env, `${command} | cat > /dev/null`, 'ignore')).ms;
      const x = round_ as Round;
      rounds.push(x);
      opts.log(
        `  round ${r + 1}: daemon ${mbps(bytes, x.daemonMs)} MB/s, bare reader ${mbps(bytes, x.bareMs)} MB/s, ` +
          `>/dev/null ${mbps(bytes, x.devNullMs)} MB/s, |cat ${mbps(bytes, x.catMs)} MB/s; ` +
          `busy ${Math.round(x.settleMs)} ms after exit; CPU daemon ${Math.round(x.daemonCpuMs)} ms vs bare ${Math.round(x.bareCpuMs)} ms; RSS ${mb(x.rssBeforeKb)} -> ${mb(x.rssAfterKb)} MB (peak ${mb(x.peakKb)} MB)`,
      );
    }
  } finally {
    client.close();
    await daemon.stop();
  }

  async function viaDaemon(c: BenchClient, cmd: string): Promise<{ ms: number; sessionId: string; peakRssKb: number }> {
    let peakRssKb = 0;
    const sampler = setInterval(() => (peakRssKb = Math.max(peakRssKb, memoryKb(daemon.pid)?.rss ?? 0)), 20);
    const t0 = now();
    const started = await c.call('exec', { command: cmd, background: true });
    const ev = await waitExit(started.sessionId);
    const ms = now() - t0;
    clearInterval(sampler);
    if (ev.status !== 'completed' || ev.exitCode !== 0) throw new Error(`capture session ended ${JSON.stringify(ev).slice(0, 300)}`);
    return { ms, sessionId: started.sessionId as string, peakRssKb };
  }

  /** Untimed, once the daemon is idle: how many characters the session saw (dropped + retained); then forget it. */
  async function countAndClear(c: BenchClient, sessionId: string): Promise<number | undefined> {
    const log = await c.call('process', { action: 'log', sessionId, limit: 0 });
    const captured = typeof log.totalChars === 'number' && typeof log.droppedChars === 'number' ? log.totalChars + log.droppedChars : undefined;
    await c.call('process', { action: 'clear', sessionId });
    return captured;
  }

  const tput = (ms: number) => bytes / 1e6 / (ms / 1000);
  const med = (f: (x: Round) => number) => median(rounds.map(f));
  const vsBare = rounds.map((x) => x.bareMs / x.daemonMs);
  const vsNull = rounds.map((x) => x.devNullMs / x.daemonMs);
  const vsCat = rounds.map((x) => x.catMs / x.daemonMs);
  const growthPeak = rounds.map((x) => (x.peakKb - x.rssBeforeKb) / 1024);
  const growthAfter = rounds.map((x) => (x.rssAfterKb - x.rssBeforeKb) / 1024);
  const sinceFresh = Math.max(...rounds.map((x) => x.peakKb)) - idleRssKb;
  const verified = rounds.every((x) => x.captured === bytes);
  const unverified = rounds.some((x) => x.captured === undefined);
  return [
    {
      bench: 'capture',
      name: 'throughput vs bare Node reader',
      value: median(vsBare),
      unit: 'x',
      target: { op: '>=', value: 0.8 },
      rounds: vsBare.map((v) => round(v, 3)),
      detail: `daemon ${round(tput(med((x) => x.daemonMs)), 0)} MB/s vs bare reader ${round(tput(med((x) => x.bareMs)), 0)} MB/s` +
        (verified ? '; all bytes counted' : unverified ? '; byte count not reported' : `; log reports ${rounds.map((x) => x.captured).join('/')} chars seen`),
    },
    {
      bench: 'capture',
      name: 'CPU per GiB, daemon vs bare reader',
      value: median(rounds.map((x) => x.daemonCpuMs / x.bareCpuMs)),
      unit: 'x',
      rounds: rounds.map((x) => round(x.daemonCpuMs / x.bareCpuMs, 3)),
      detail: `daemon ${round(med((x) => x.daemonCpuMs) / (bytes / GiB), 0)} ms vs bare reader ${round(med((x) => x.bareCpuMs) / (bytes / GiB), 0)} ms of CPU (user+sys) per GiB; less sensitive to load than wall time`,
    },
    {
      bench: 'capture',
      name: 'daemon busy after the exit event',
      value: median(rounds.map((x) => x.settleMs)),
      unit: 'ms',
      rounds: rounds.map((x) => round(x.settleMs, 0)),
      detail: 'until its CPU time stops moving (50 ms samples, 10 ms ticks); counted in the CPU figure above',
    },
    {
      bench: 'capture',
      name: 'throughput vs `cmd > /dev/null`',
      value: median(vsNull),
      unit: 'x',
      rounds: vsNull.map((v) => round(v, 3)),
      detail: `> /dev/null ${round(tput(med((x) => x.devNullMs)), 0)} MB/s (no pipe at all)`,
    },
    {
      bench: 'capture',
      name: 'throughput vs `cmd | cat > /dev/null`',
      value: median(vsCat),
      unit: 'x',
      rounds: vsCat.map((v) => round(v, 3)),
      detail: `| cat ${round(tput(med((x) => x.catMs)), 0)} MB/s (a pipe's own limit)`,
    },
    {
      bench: 'capture',
      name: 'daemon RSS growth, peak (worst round)',
      value: Math.max(...growthPeak),
      unit: 'MB',
      target: { op: '<', value: 64 },
      rounds: growthPeak.map((v) => round(v, 1)),
      detail: `peak VmRSS during the capture (VmHWM reset before it, and 20 ms samples) minus VmRSS just before it`,
    },
    {
      bench: 'capture',
      name: 'daemon RSS growth, after (worst round)',
      value: Math.max(...growthAfter),
      unit: 'MB',
      target: { op: '<', value: 64 },
      rounds: growthAfter.map((v) => round(v, 1)),
      detail: 'VmRSS once the daemon is idle after the exit, minus VmRSS just before the capture',
    },
    {
      bench: 'capture',
      name: 'daemon peak RSS over a fresh daemon',
      value: sinceFresh / 1024,
      unit: 'MB',
      detail: `highest peak of all rounds minus the RSS of the daemon before its first capture (${mb(idleRssKb)} MB)`,
    },
  ];
}

/** Resolve once a process has used no CPU for 300 ms (at most 60 s); returns how long that took, less the quiet 300 ms. */
async function untilIdle(pid: number): Promise<number> {
  const t0 = now();
  let last = cpuMs(pid);
  let quietSince = now();
  while (now() - t0 < 60_000) {
    await sleep(50);
    const cpu = cpuMs(pid);
    if (cpu !== last) {
      last = cpu;
      quietSince = now();
    } else if (now() - quietSince >= 300) return quietSince - t0;
  }
  return now() - t0;
}

const mbps = (bytes: number, ms: number) => Math.round(bytes / 1e6 / (ms / 1000));
const mb = (kb: number) => Math.round(kb / 1024);
