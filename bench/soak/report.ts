import { quantile, round } from '../lib/stats.js';
import { stackedCharts, type Chart } from './plot.js';
import type { Sample } from './sampler.js';

/** Descriptors the quiet daemon may hold more at the end than at the start before the run fails. */
export const FD_SLACK = 5;
/** RSS at the end may exceed RSS after the first tenth by this fraction. */
export const RSS_SLACK = 0.1;

/** The daemon with no session and every soak connection open, before the load and after it. */
export interface Quiet {
  rssMB: number;
  fds: number;
  heapUsedMB: number;
  objects: Record<string, number>;
  resources: Record<string, number>;
}

export interface Summary {
  loadSeconds: number;
  rssMB: { at10: number; at50: number; end: number; max: number; growthMBPerHour: number };
  guardianRssMB?: { at10: number; end: number };
  heapUsedMB: { at10: number; end: number; growthMBPerHour: number };
  fds: { min: number; max: number; quietStart: number; quietEnd: number };
  loopMs: { probes: number; p50: number; p99: number; max: number; errors: number; skippedForDiagnostics: number };
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
  soakLoopP99MaxMs: number;
  sessionsStarted: number;
}

/** The daemon's own loop delay of a sample, when daemon.diagnostics reported one (ms). */
export function daemonLoop(s: Sample): { p50: number; p99: number; max: number } | undefined {
  const d = s.daemonLoopDelay as { p50?: unknown; p99?: unknown; max?: unknown } | null | undefined;
  return d && typeof d.p99 === 'number' && typeof d.max === 'number' ? { p50: Number(d.p50), p99: d.p99, max: d.max } : undefined;
}

/** Median of the values whose time falls in [from, to); the nearest sample's if none does. */
function around<T extends { t: number }>(xs: T[], from: number, to: number, value: (x: T) => number | undefined): number {
  const have = xs.filter((x) => value(x) !== undefined && Number.isFinite(value(x)));
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

export function summarise(samples: Sample[], loop: { all: number[]; errors: number; skipped: number }, quiet: { start: Quiet; end: Quiet }, loadSeconds: number, sessionsStarted: number): Summary {
  const T = loadSeconds;
  const r1 = (n: number) => round(n, 1);
  const rss = (s: Sample) => s.rssMB;
  const heap = (s: Sample) => s.heapUsedMB;
  const guardian = (s: Sample) => s.guardianRssMB;
  return {
    loadSeconds: Math.round(T),
    rssMB: {
      at10: around(samples, 0.1 * T, 0.15 * T, rss),
      at50: around(samples, 0.5 * T, 0.55 * T, rss),
      end: around(samples, 0.95 * T, Infinity, rss),
      max: Math.max(...samples.map(rss)),
      growthMBPerHour: r1(slopePerHour(samples, 0.1 * T, rss)),
    },
    ...(samples.some((s) => s.guardianRssMB !== undefined)
      ? { guardianRssMB: { at10: around(samples, 0.1 * T, 0.15 * T, guardian), end: around(samples, 0.95 * T, Infinity, guardian) } }
      : {}),
    heapUsedMB: {
      at10: around(samples, 0.1 * T, 0.2 * T, heap),
      end: around(samples, 0.9 * T, Infinity, heap),
      growthMBPerHour: r1(slopePerHour(samples, 0.1 * T, heap)),
    },
    fds: { min: Math.min(...samples.map((s) => s.fds)), max: Math.max(...samples.map((s) => s.fds)), quietStart: quiet.start.fds, quietEnd: quiet.end.fds },
    loopMs: {
      probes: loop.all.length,
      p50: round(quantile(loop.all, 0.5), 3),
      p99: round(quantile(loop.all, 0.99), 3),
      max: round(Math.max(...loop.all), 3),
      errors: loop.errors,
      skippedForDiagnostics: loop.skipped,
    },
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
  const limit = summary.rssMB.at10 * (1 + RSS_SLACK);
  if (!(summary.rssMB.end <= limit)) reasons.push(`RSS at the end ${summary.rssMB.end} MB is over ${round(limit, 1)} MB (RSS after the first tenth ${summary.rssMB.at10} MB + ${RSS_SLACK * 100}%)`);
  const left = Object.entries(quiet.end.objects).filter(([k, n]) => n > (quiet.start.objects[k] ?? 0));
  if (left.length) {
    reasons.push(`after every session was forgotten the daemon holds more objects than before the load: ${left.map(([k, n]) => `${k} ${quiet.start.objects[k] ?? 0} -> ${n}`).join(', ')}`);
  }
  if (summary.loopMs.errors) reasons.push(`${summary.loopMs.errors} daemon.status probe(s) failed`);
  reasons.push(...survivors);
  return reasons;
}

export function text(summary: Summary, quiet: { start: Quiet; end: Quiet }, tasks: { task: string; runs: number; failed: number; meanMs: number; maxMs: number }[], reasons: string[]): string {
  const s = summary;
  const lines = [
    `load ${round(s.loadSeconds / 60, 1)} min, ${s.sessionsStarted} sessions started`,
    `RSS          ${s.rssMB.at10} MB at 10%, ${s.rssMB.at50} MB at 50%, ${s.rssMB.end} MB at the end (max ${s.rssMB.max}); trend after 10%: ${s.rssMB.growthMBPerHour} MB/h`,
    ...(s.guardianRssMB ? [`guardian RSS ${s.guardianRssMB.at10} MB at 10%, ${s.guardianRssMB.end} MB at the end`] : []),
    `heap used    ${s.heapUsedMB.at10} MB at 10-20%, ${s.heapUsedMB.end} MB in the last 10% (after a full GC); trend ${s.heapUsedMB.growthMBPerHour} MB/h`,
    `descriptors  ${s.fds.min}-${s.fds.max} under load; quiet ${s.fds.quietStart} before, ${s.fds.quietEnd} after`,
    `loop delay   daemon.status round trip p50 ${s.loopMs.p50} ms, p99 ${s.loopMs.p99} ms, max ${s.loopMs.max} ms (${s.loopMs.probes} probes)`,
    ...(s.daemonLoopDelayMs
      ? [`             as the daemon measures it: p99 ${s.daemonLoopDelayMs.p99Median} ms (median of ${s.daemonLoopDelayMs.windows} windows), worst window p99 ${s.daemonLoopDelayMs.p99Max} ms, max ${s.daemonLoopDelayMs.max} ms`]
      : []),
    `CPU          daemon ${s.cpu.daemonMeanPct}% of one core on average (max ${s.cpu.daemonMaxPct}%), ${s.cpu.withSessionsMeanPct}% with its sessions; ` +
      `the soak in all (daemon, sessions, guardian, clients) ${s.cpu.totalMeanPct}% (max ${s.cpu.totalMaxPct}%)`,
    `machine      ${s.cpu.machineBusyMeanPct}% busy on average (100 = every core), load average ${s.cpu.load1Mean} (max ${s.cpu.load1Max})`,
    `left behind  ${Object.entries(quiet.end.objects).map(([k, n]) => `${k} ${n}`).join(', ')} (after every session was forgotten)`,
    '',
    'task                 runs  failed  mean ms  max ms',
    ...tasks.map((t) => `${t.task.padEnd(20)} ${String(t.runs).padStart(5)}  ${String(t.failed).padStart(6)}  ${String(t.meanMs).padStart(7)}  ${String(t.maxMs).padStart(6)}`),
    '',
    reasons.length ? `FAIL\n${reasons.map((r) => `  - ${r}`).join('\n')}` : 'PASS',
  ];
  return lines.join('\n');
}

export function svg(samples: Sample[], summary: Summary, subtitle: string): string {
  const T = summary.loadSeconds;
  const pts = (f: (s: Sample) => number | undefined) => samples.filter((s) => f(s) !== undefined).map((s) => [s.t, f(s)!] as [number, number]);
  const charts: Chart[] = [
    {
      title: 'Memory',
      unit: 'MB',
      series: [
        { label: 'daemon RSS', color: '#1f77b4', points: pts((s) => s.rssMB) },
        { label: 'heap used after full GC', color: '#2ca02c', points: pts((s) => s.heapUsedMB), dots: true },
        ...(summary.guardianRssMB ? [{ label: 'guardian RSS', color: '#9467bd', points: pts((s) => s.guardianRssMB), dashed: true }] : []),
      ],
      refs: [{ y: summary.rssMB.at10 * (1 + RSS_SLACK), label: `limit: RSS after the first tenth + ${RSS_SLACK * 100}%`, color: '#d62728' }],
    },
    {
      title: 'Open descriptors and running sessions',
      unit: 'count',
      series: [
        { label: 'daemon descriptors', color: '#ff7f0e', points: pts((s) => s.fds) },
        { label: 'running sessions', color: '#7f7f7f', points: pts((s) => s.running), dashed: true },
      ],
    },
    {
      title: 'Event-loop delay: daemon.status round trip, every second, per sample window',
      unit: 'ms',
      log: true,
      series: [
        { label: 'p50', color: '#2ca02c', points: pts((s) => s.loop.p50) },
        { label: 'max', color: '#d62728', points: pts((s) => s.loop.max) },
        ...(summary.daemonLoopDelayMs ? [{ label: "daemon's own p99 (diagnostics)", color: '#1f77b4', points: pts((s) => daemonLoop(s)?.p99), dots: true, dashed: true }] : []),
      ],
      refs: [{ y: summary.loopMs.p99, label: `p99 over the run: ${summary.loopMs.p99} ms`, color: '#555' }],
    },
  ];
  return stackedCharts('procctld soak', subtitle, charts, T / 60, [{ x: (0.1 * T) / 60, label: 'first tenth' }]);
}
