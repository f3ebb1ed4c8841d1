import 'uplot/dist/uPlot.min.css';
import uPlot from 'uplot';
import { useEffect, useRef } from 'preact/hooks';
import { usage } from './connection.js';

/** A session's CPU (% of a core) and memory (MiB) while the page has watched it, drawn by uPlot. */
export function UsageChart({ usageKey, version }: { usageKey: string; version: number }) {
  const box = useRef<HTMLDivElement>(null);
  const plot = useRef<uPlot | undefined>(undefined);
  useEffect(() => {
    plot.current = new uPlot(
      {
        width: Math.min(600, box.current!.clientWidth || 600),
        height: 140,
        series: [{}, { label: 'CPU %', stroke: '#0b5cad', scale: '%' }, { label: 'Memory MiB', stroke: '#b35900', scale: 'MiB' }],
        axes: [{}, { scale: '%', label: 'CPU %' }, { scale: 'MiB', side: 1, label: 'MiB', grid: { show: false } }],
        scales: { x: { time: true } },
      },
      [[], [], []],
      box.current!,
    );
    return () => plot.current?.destroy();
  }, [usageKey]);
  useEffect(() => {
    const u = usage.get(usageKey);
    if (u && plot.current) plot.current.setData([u.at, u.cpuPercent, u.memoryMiB]);
  }, [usageKey, version]);
  return <div class="chart" ref={box} role="img" aria-label="CPU and memory over time" />;
}
