import { quantile, round } from '../lib/stats.js';
import type { Sample } from './sampler.js';

/** Descriptors the quiet daemon may hold more at the end than at the start before the run fails. */
export const FD_SLACK = 5;
/**
 * RSS over the last stretch may exceed RSS over the stretch after the warm-up (the first tenth)
 * by this fraction. Medians over whole stretches: RSS saws up and down by tens of MB between
 * major GCs, so a shorter window measures where in a cycle it ended.
 */
export const RSS_SLACK = 0.1;
/** The stretches compared at the start and the end of the run: 5 minutes, less on a short run. */
export const WINDOW_S = 300;

/** The daemon with no session and every soak connection open, before the load and after it. */
export interface Quiet {
  rssMB: number;
  rssAnonMB: number;
  fds: number;
  heapUsedMB: number;
  objects: Record<string, number>;
  resources: Record<string, number>;
}

/** Medians over one stretch of the run, except where a name says otherwise. */
export interface Stretch {
  fromS: number;
  toS: number;
  rssMB: number;
  heapUsedMB: number;
  fds: number;
  fdsMax: number;
  /** Sessions held: running plus finished and not yet forgotten. */
  sessions: number;
  running: number;
  /** daemon.status round trips of the probe, over the stretch. */
  probe: { n: number; p50: number; p99: number; max: number };
  /** The daemon's own loop delay: median of its windows' p99, and the largest max. */
  daemonLoop?: { p99: number; max: number };
  daemonCpuPct: number;
  machineBusyPct: number;
}

export interface Summary {
  loadSeconds: number;
  /** Medians: over the stretch after the warm-up, around the middle, over the last stretch. */
  rssMB: { afterWarmUp: number; middle: number; end: number; max: number };
  guardianRssMB?: { afterWarmUp: number; end: number };
  heapUsedMB: { afterWarmUp: number; end: number };
  fds: { min: number; max: number; quietStart: number; quietEnd: number };
  loopMs: { probes: number; p50: number; p99: number; max: number; errors: number; skippedForDiagnostics: number };
  /** Least-squares trend per hour from the end of the warm-up (the first tenth) on. */
  slopesPerHour: { rssMB: number; heapUsedMB: number; fds: number; sessions: number; probeMaxMs: number; daemonLoopP99Ms?: number };
  first: Stretch;
  last: Stretch;
  cpu: {
    daemonMeanPct: number;
    daemonMaxPct: number;
    withSessionsMeanPct: number;
    soakMeanPct: number;
    totalMeanPct: number;
    totalMaxPct: number;
    machineBusyMeanPct: number;
    load1Mean: number;
    load1Max: number;
  };
  /** The daemon's own loop-delay figures (daemon.diagnostics `eventLoopDelay`, one per call), when it reports them. */
  daemonLoopDelayMs?: { windows: number; p99Median: number; p99Max: number; max: number };
  /** How long a daemon.diagnostics call (without the object counts) took, ms. */
  diagnosticsMs: { median: number; max: number };
  soakLoopP99MaxMs: number;
  sessionsStarted: number;
}

/** The daemon's own loop delay of a sample, when daemon.diagnostics reported one (ms). */
export function daemonLoop(s: Sample): { p50: number; p99: number; max: number } | undefined {
  const d = s.daemonLoopDelay as { p50?: unknown; p99?: unknown; max?: unknown } | null | undefined;
  return d && typeof d.p99 === 'number' && typeof d.max === 'number' ? { p50: Number(d.p50), p99: d.p99, max: d.max } : undefined;
}

const sessionsOf = (s: Sample) => s.running + s.finished;

/** Median of the values whose time falls in [from, to); the nearest sample's if none does. */
function around<T extends { t: number }>(xs: T[], from: number, to: number, value: (x: T) => number | undefined): number {
  const have = xs.filter((x) => Number.isFinite(value(x)));
  const inside = have.filter((x) => x.t >= from && x.t < to).map((x) => value(x)!);
  if (inside.length) return quantile(inside, 0.5);
  const mid = (from + to) / 2;
  const nearest = have.reduce<T | undefined>((best, x) => (!best || Math.abs(x.t - mid) < Math.abs(best.t - mid) ? x : best), undefined);
  return nearest ? value(nearest)! : Number.NaN;
}

/** Least-squares slope of value over time, per hour, from `from` on. */
function slopePerHour<T extends { t: number }>(xs: T[], from: number, value: (x: T) => number | undefined): number {
  const pts = xs.filter((x) => x.t >= from && Number.isFinite(value(x))).map((x) => [x.t / 3600, value(x)!] as const);
  if (pts.length < 3) return Number.NaN;
  const mx = pts.reduce((s, [x]) => s + x, 0) / pts.length;
  const my = pts.reduce((s, [, y]) => s + y, 0) / pts.length;
  const num = pts.reduce((s, [x, y]) => s + (x - mx) * (y - my), 0);
  const den = pts.reduce((s, [x]) => s + (x - mx) ** 2, 0);
  return den ? num / den : Number.NaN;
}

const mean = (xs: number[]) => (xs.length ? xs.reduce((s, x) => s + x, 0) / xs.length : Number.NaN);

/** The figures of the samples whose time falls in [from, to); `to` past the load's end is its end. */
function stretch(samples: Sample[], probes: [number, number][], from: number, to: number, loadSeconds: number): Stretch {
  const mid = (v: (s: Sample) => number | undefined) => round(around(samples, from, to, v), 1);
  const inside = samples.filter((s) => s.t >= from && s.t < to);
  const ms = probes.filter(([t]) => t >= from && t < to).map(([, m]) => m);
  const own = inside.map(daemonLoop).filter((d) => d !== undefined);
  return {
    fromS: Math.round(from),
    toS: Math.round(Math.min(to, loadSeconds)),
    rssMB: mid((s) => s.rssMB),
    heapUsedMB: mid((s) => s.heapUsedMB),
    fds: mid((s) => s.fds),
    fdsMax: Math.max(...inside.map((s) => s.fds)),
    sessions: mid(sessionsOf),
    running: mid((s) => s.running),
    probe: { n: ms.length, p50: round(quantile(ms, 0.5), 3), p99: round(quantile(ms, 0.99), 3), max: ms.length ? round(Math.max(...ms), 3) : Number.NaN },
    ...(own.length ? { daemonLoop: { p99: round(quantile(own.map((d) => d.p99), 0.5), 3), max: round(Math.max(...own.map((d) => d.max)), 3) } } : {}),
    daemonCpuPct: mid((s) => s.cpuPct),
    machineBusyPct: mid((s) => s.machineBusyPct),
  };
}

export function summarise(
  samples: Sample[],
  loop: { all: [number, number][]; errors: number; skipped: number },
  quiet: { start: Quiet; end: Quiet },
  loadSeconds: number,
  sessionsStarted: number,
): Summary {
  const T = loadSeconds;
  const w = Math.min(WINDOW_S, T / 6);
  const r1 = (n: number) => round(n, 1);
  const rss = (s: Sample) => s.rssMB;
  const heap = (s: Sample) => s.heapUsedMB;
  const guardian = (s: Sample) => s.guardianRssMB;
  const all = loop.all.map(([, ms]) => ms);
  const diag = samples.map((s) => s.diagMs).filter((x) => x !== undefined);
  const ownP99 = slopePerHour(samples, 0.1 * T, (s) => daemonLoop(s)?.p99);
  return {
    loadSeconds: Math.round(T),
    rssMB: {
      afterWarmUp: around(samples, 0.1 * T, 0.1 * T + w, rss),
      middle: around(samples, (T - w) / 2, (T + w) / 2, rss),
      end: around(samples, T - w, Infinity, rss),
      max: Math.max(...samples.map(rss)),
    },
    ...(samples.some((s) => s.guardianRssMB !== undefined)
      ? { guardianRssMB: { afterWarmUp: around(samples, 0.1 * T, 0.1 * T + w, guardian), end: around(samples, T - w, Infinity, guardian) } }
      : {}),
    heapUsedMB: { afterWarmUp: around(samples, 0.1 * T, 0.1 * T + w, heap), end: around(samples, T - w, Infinity, heap) },
    fds: { min: Math.min(...samples.map((s) => s.fds)), max: Math.max(...samples.map((s) => s.fds)), quietStart: quiet.start.fds, quietEnd: quiet.end.fds },
    loopMs: {
      probes: all.length,
      p50: round(quantile(all, 0.5), 3),
      p99: round(quantile(all, 0.99), 3),
      max: round(Math.max(...all), 3),
      errors: loop.errors,
      skippedForDiagnostics: loop.skipped,
    },
    slopesPerHour: {
      rssMB: r1(slopePerHour(samples, 0.1 * T, rss)),
      heapUsedMB: r1(slopePerHour(samples, 0.1 * T, heap)),
      fds: r1(slopePerHour(samples, 0.1 * T, (s) => s.fds)),
      sessions: r1(slopePerHour(samples, 0.1 * T, sessionsOf)),
      probeMaxMs: r1(slopePerHour(samples, 0.1 * T, (s) => s.loop.max)),
      ...(Number.isFinite(ownP99) ? { daemonLoopP99Ms: round(ownP99, 2) } : {}),
    },
    first: stretch(samples, loop.all, 0, w, T),
    last: stretch(samples, loop.all, T - w, Infinity, T),
    cpu: {
      daemonMeanPct: r1(mean(samples.map((s) => s.cpuPct))),
      daemonMaxPct: Math.max(...samples.map((s) => s.cpuPct)),
      withSessionsMeanPct: r1(mean(samples.map((s) => s.cpuWithSessionsPct))),
      soakMeanPct: r1(mean(samples.map((s) => s.soakCpuPct))),
      totalMeanPct: r1(mean(samples.map((s) => s.totalCpuPct))),
      totalMaxPct: Math.max(...samples.map((s) => s.totalCpuPct)),
      machineBusyMeanPct: r1(mean(samples.map((s) => s.machineBusyPct))),
      load1Mean: round(mean(samples.map((s) => s.load1)), 2),
      load1Max: Math.max(...samples.map((s) => s.load1)),
    },
    ...daemonLoopSummary(samples),
    diagnosticsMs: { median: r1(quantile(diag, 0.5)), max: r1(Math.max(...diag)) },
    soakLoopP99MaxMs: Math.max(...samples.map((s) => s.soakLoopP99Ms)),
    sessionsStarted,
  };
}

function daemonLoopSummary(samples: Sample[]): Pick<Summary, 'daemonLoopDelayMs'> {
  const own = samples.map(daemonLoop).filter((d) => d !== undefined);
  if (!own.length) return {};
  return {
    daemonLoopDelayMs: {
      windows: own.length,
      p99Median: round(quantile(own.map((d) => d.p99), 0.5), 3),
      p99Max: round(Math.max(...own.map((d) => d.p99)), 3),
      max: round(Math.max(...own.map((d) => d.max)), 3),
    },
  };
}

/** Why the run failed, one line per reason; empty when it passed. */
export function verdict(summary: Summary, quiet: { start: Quiet; end: Quiet }, failureCount: number, survivors: string[]): string[] {
  const reasons: string[] = [];
  if (failureCount) reasons.push(`${failureCount} failed request(s) or output mismatch(es)`);
  const grew = summary.fds.quietEnd - summary.fds.quietStart;
  if (grew > FD_SLACK) reasons.push(`the quiet daemon holds ${grew} more descriptors than before the load (${summary.fds.quietStart} -> ${summary.fds.quietEnd})`);
  const limit = summary.rssMB.afterWarmUp * (1 + RSS_SLACK);
  if (!(summary.rssMB.end <= limit)) {
    reasons.push(`RSS over the last stretch ${summary.rssMB.end} MB is over ${round(limit, 1)} MB (RSS after the warm-up ${summary.rssMB.afterWarmUp} MB + ${RSS_SLACK * 100}%)`);
  }
  const left = Object.entries(quiet.end.objects).filter(([k, n]) => n > (quiet.start.objects[k] ?? 0));
  if (left.length) {
    reasons.push(`after every session was forgotten the daemon holds more objects than before the load: ${left.map(([k, n]) => `${k} ${quiet.start.objects[k] ?? 0} -> ${n}`).join(', ')}`);
  }
  if (summary.loopMs.errors) reasons.push(`${summary.loopMs.errors} daemon.status probe(s) failed`);
  reasons.push(...survivors);
  return reasons;
}

/** A stretch's length in minutes, or the stretch of that length starting at `from` seconds. */
function span(st: Stretch, from?: number): string {
  const len = (st.toS - st.fromS) / 60;
  return from === undefined ? `${round(len, 1)} min` : `${round(from / 60, 1)}-${round(from / 60 + len, 1)} min`;
}

const sign = (n: number) => (n > 0 ? `+${n}` : String(n));

function stretchLine(name: string, s: Stretch): string {
  const own = s.daemonLoop ? `, daemon's own loop delay p99 ${s.daemonLoop.p99} ms max ${s.daemonLoop.max} ms` : '';
  return (
    `${name.padEnd(13)}${round(s.fromS / 60, 1)}-${round(s.toS / 60, 1)} min: RSS ${s.rssMB} MB, heap ${s.heapUsedMB} MB, ${s.fds} fds (max ${s.fdsMax}), ` +
    `${s.sessions} sessions held (${s.running} running); probe p50 ${s.probe.p50} ms p99 ${s.probe.p99} ms max ${s.probe.max} ms${own}; ` +
    `daemon CPU ${s.daemonCpuPct}%, machine ${s.machineBusyPct}% busy`
  );
}

export function text(summary: Summary, quiet: { start: Quiet; end: Quiet }, tasks: { task: string; runs: number; failed: number; meanMs: number; maxMs: number }[], reasons: string[]): string {
  const s = summary;
  const k = s.slopesPerHour;
  const lines = [
    `load ${round(s.loadSeconds / 60, 1)} min, ${s.sessionsStarted} sessions started`,
    `RSS          medians: ${s.rssMB.afterWarmUp} MB after the warm-up (${span(s.first, s.loadSeconds / 10)}), ${s.rssMB.middle} MB in the middle, ` +
      `${s.rssMB.end} MB over the last ${span(s.last)} (max ${s.rssMB.max})`,
    ...(s.guardianRssMB ? [`guardian RSS ${s.guardianRssMB.afterWarmUp} MB after the warm-up, ${s.guardianRssMB.end} MB at the end`] : []),
    `heap used    ${s.heapUsedMB.afterWarmUp} MB after the warm-up, ${s.heapUsedMB.end} MB at the end (as in use, not after a GC)`,
    `descriptors  ${s.fds.min}-${s.fds.max} under load; quiet ${s.fds.quietStart} before, ${s.fds.quietEnd} after`,
    `loop delay   daemon.status round trip p50 ${s.loopMs.p50} ms, p99 ${s.loopMs.p99} ms, max ${s.loopMs.max} ms (${s.loopMs.probes} probes)`,
    ...(s.daemonLoopDelayMs
      ? [`             as the daemon measures it: p99 ${s.daemonLoopDelayMs.p99Median} ms (median of ${s.daemonLoopDelayMs.windows} windows), worst window p99 ${s.daemonLoopDelayMs.p99Max} ms, max ${s.daemonLoopDelayMs.max} ms`]
      : []),
    `trend/hour   after the first tenth: RSS ${sign(k.rssMB)} MB, heap ${sign(k.heapUsedMB)} MB, fds ${sign(k.fds)}, sessions held ${sign(k.sessions)}, ` +
      `probe max ${sign(k.probeMaxMs)} ms${k.daemonLoopP99Ms !== undefined ? `, daemon loop p99 ${sign(k.daemonLoopP99Ms)} ms` : ''}`,
    stretchLine('first', s.first),
    stretchLine('last', s.last),
    `CPU          daemon ${s.cpu.daemonMeanPct}% of one core on average (max ${s.cpu.daemonMaxPct}%), ${s.cpu.withSessionsMeanPct}% with its sessions; ` +
      `the soak in all (daemon, sessions, guardian, clients) ${s.cpu.totalMeanPct}% (max ${s.cpu.totalMaxPct}%)`,
    `machine      ${s.cpu.machineBusyMeanPct}% busy on average (100 = every core), load average ${s.cpu.load1Mean} (max ${s.cpu.load1Max})`,
    `diagnostics  each daemon.diagnostics call took ${s.diagnosticsMs.median} ms (median; max ${s.diagnosticsMs.max} ms)`,
    `quiet        before the load RSS ${quiet.start.rssMB} MB (${quiet.start.rssAnonMB} anonymous), heap ${quiet.start.heapUsedMB} MB; ` +
      `after it RSS ${quiet.end.rssMB} MB (${quiet.end.rssAnonMB} anonymous), heap ${quiet.end.heapUsedMB} MB`,
    `left behind  ${Object.entries(quiet.end.objects).map(([name, n]) => `${name} ${n}`).join(', ')} (after every session was forgotten)`,
    '',
    'task                 runs  failed  mean ms  max ms',
    ...tasks.map((t) => `${t.task.padEnd(20)} ${String(t.runs).padStart(5)}  ${String(t.failed).padStart(6)}  ${String(t.meanMs).padStart(7)}  ${String(t.maxMs).padStart(6)}`),
    '',
    reasons.length ? `FAIL\n${reasons.map((r) => `  - ${r}`).join('\n')}` : 'PASS',
  ];
  return lines.join('\n');
}
