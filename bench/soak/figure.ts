import { stackedCharts, type Chart } from './plot.js';
import { daemonLoop, RSS_SLACK, type Summary } from './report.js';
import type { Sample } from './sampler.js';

/** docs/soak.svg: memory, descriptors and sessions, event-loop delay and CPU over the run. */
export function soakFigure(samples: Sample[], summary: Summary, subtitle: string, diagSec: number): string {
  const T = summary.loadSeconds;
  const pts = (f: (s: Sample) => number | undefined) => samples.filter((s) => f(s) !== undefined).map((s) => [s.t, f(s)!] as [number, number]);
  const own = summary.daemonLoopDelayMs !== undefined;
  const minutes = (s: number) => s / 60;
  const warmUp = minutes(0.1 * T);
  const span = minutes(summary.first.toS - summary.first.fromS);
  const charts: Chart[] = [
    {
      title: 'Memory of the daemon',
      unit: 'MB',
      series: [
        { label: 'RSS', color: '#1f77b4', points: pts((s) => s.rssMB) },
        { label: 'anonymous part of RSS', color: '#aec7e8', points: pts((s) => s.rssAnonMB), dashed: true },
        { label: `heap used after a full GC (every ${diagSec} s)`, color: '#2ca02c', points: pts((s) => s.heapUsedMB), dots: true },
        ...(summary.guardianRssMB ? [{ label: 'guardian helper RSS', color: '#9467bd', points: pts((s) => s.guardianRssMB), dashed: true }] : []),
      ],
      refs: [
        { y: summary.rssMB.afterWarmUp * (1 + RSS_SLACK), label: `limit: median after the warm-up + ${RSS_SLACK * 100}%`, color: '#d62728' },
        { y: summary.rssMB.afterWarmUp, label: 'median', color: '#000', from: warmUp, to: warmUp + span },
        { y: summary.rssMB.end, label: 'median', color: '#000', from: minutes(summary.last.fromS), to: minutes(T) },
      ],
    },
    {
      title: 'Open descriptors of the daemon, and sessions it holds',
      unit: 'count',
      series: [
        { label: 'descriptors', color: '#ff7f0e', points: pts((s) => s.fds) },
        { label: 'sessions held (running + finished, not yet forgotten)', color: '#7f7f7f', points: pts((s) => s.running + s.finished), dashed: true },
        { label: 'running sessions', color: '#17becf', points: pts((s) => s.running) },
      ],
    },
    {
      title: 'Event-loop delay',
      unit: 'ms',
      log: true,
      series: [
        { label: 'daemon.status round trip, p50 per 5 s', color: '#2ca02c', points: pts((s) => s.loop.p50) },
        { label: 'round trip, max per 5 s', color: '#d62728', points: pts((s) => s.loop.max) },
        ...(own
          ? [
              { label: `daemon's own p99 per ${diagSec} s`, color: '#1f77b4', points: pts((s) => daemonLoop(s)?.p99), dots: true, dashed: true },
              { label: 'own max', color: '#9467bd', points: pts((s) => daemonLoop(s)?.max), dots: true, dashed: true },
            ]
          : []),
      ],
      refs: [{ y: summary.loopMs.p99, label: `round trip p99 over the run: ${summary.loopMs.p99} ms`, color: '#555' }],
    },
    {
      title: 'CPU',
      unit: '%',
      series: [
        { label: 'daemon, % of one core', color: '#1f77b4', points: pts((s) => s.cpuPct) },
        { label: 'the whole machine, % of all cores (other work included)', color: '#7f7f7f', points: pts((s) => s.machineBusyPct), dashed: true },
      ],
    },
  ];
  const spanText = `${+span.toFixed(1)} min`;
  return stackedCharts(
    'procctld soak',
    subtitle,
    charts,
    minutes(T),
    [{ x: warmUp, label: 'warm-up ends' }],
    [
      { from: minutes(summary.first.fromS), to: minutes(summary.first.toS), label: `first ${spanText}` },
      { from: minutes(summary.last.fromS), to: minutes(T), label: `last ${spanText}` },
    ],
  );
}
