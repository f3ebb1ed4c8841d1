/** Stacked line charts as plain SVG: a shared time axis, one chart per quantity, no dependencies. */

export interface Series {
  label: string;
  color: string;
  /** [seconds into the run, value]. */
  points: [number, number][];
  dashed?: boolean;
  /** Draw a marker at each point (for sparse series). */
  dots?: boolean;
}

export interface Chart {
  title: string;
  /** The y axis label, with its unit. */
  unit: string;
  series: Series[];
  log?: boolean;
  /** Horizontal reference lines (limits), across the chart or from one minute to another. */
  refs?: { y: number; label: string; color: string; from?: number; to?: number }[];
}

const W = 960;
const LEFT = 72;
const RIGHT = 24;
const CHART_H = 180;
/** Above each chart: its title, then its legend. */
const HEAD = 44;
/** Below each chart: the time axis and its label. */
const FOOT = 44;
const TOP = 56;

const esc = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function niceStep(span: number, ticks: number): number {
  const raw = span / Math.max(1, ticks);
  const mag = 10 ** Math.floor(Math.log10(raw));
  const f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

function fmtTick(v: number): string {
  if (v === 0) return '0';
  const abs = Math.abs(v);
  if (abs >= 1000) return `${Math.round(v / 100) / 10}k`.replace('.0k', 'k');
  if (abs >= 1) return String(Math.round(v * 100) / 100);
  return String(Number(v.toPrecision(2)));
}

function finite(points: [number, number][]): [number, number][] {
  return points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y));
}

/** A vertical line at a minute of the run. */
export interface Mark {
  x: number;
  label: string;
}

/** A shaded stretch of the run, in minutes. */
export interface Band {
  from: number;
  to: number;
  label: string;
}

/** The SVG of charts stacked over a time axis in minutes, with vertical marks and shaded bands. */
export function stackedCharts(title: string, subtitle: string, charts: Chart[], xMaxMin: number, marks: Mark[] = [], bands: Band[] = []): string {
  const plotW = W - LEFT - RIGHT;
  const height = TOP + charts.length * (HEAD + CHART_H + FOOT) + 8;
  const xStep = niceStep(xMaxMin, 10);
  const xMax = Math.max(xStep, Math.ceil(xMaxMin / xStep - 1e-9) * xStep);
  const sx = (m: number) => LEFT + (m / xMax) * plotW;
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${height}" viewBox="0 0 ${W} ${height}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">`,
    `<rect width="${W}" height="${height}" fill="#ffffff"/>`,
    `<text x="${LEFT}" y="24" font-size="16" font-weight="bold">${esc(title)}</text>`,
    `<text x="${LEFT}" y="44" fill="#444">${esc(subtitle)}</text>`,
  ];
  charts.forEach((chart, i) => {
    const top = TOP + i * (HEAD + CHART_H + FOOT) + HEAD;
    const bottom = top + CHART_H;
    const all = chart.series.flatMap((s) => finite(s.points).map(([, y]) => y)).concat((chart.refs ?? []).map((r) => r.y));
    let sy: (v: number) => number;
    let yTicks: number[];
    if (chart.log) {
      const positive = all.filter((y) => y > 0);
      const lo = 10 ** Math.floor(Math.log10(Math.min(...positive, 1)));
      const hi = 10 ** Math.ceil(Math.log10(Math.max(...positive, 1) * 1.0001));
      sy = (v: number) => bottom - ((Math.log10(Math.max(v, lo)) - Math.log10(lo)) / (Math.log10(hi) - Math.log10(lo))) * CHART_H;
      yTicks = [];
      for (let v = lo; v <= hi * 1.0001; v *= 10) yTicks.push(v);
    } else {
      const max = Math.max(...all, 0);
      const min = Math.min(...all, 0);
      const step = niceStep(max - min || 1, 5);
      const lo = Math.floor(min / step) * step;
      const hi = Math.max(lo + step, Math.ceil((max * 1.05) / step) * step);
      sy = (v: number) => bottom - ((v - lo) / (hi - lo)) * CHART_H;
      yTicks = [];
      for (let v = lo; v <= hi + step / 1000; v += step) yTicks.push(v);
    }
    out.push(`<text x="${LEFT}" y="${top - 26}" font-size="14" font-weight="bold">${esc(chart.title)}</text>`);
    out.push(`<rect x="${LEFT}" y="${top}" width="${plotW}" height="${CHART_H}" fill="#fafafa" stroke="#999"/>`);
    for (const band of bands) {
      const x0 = sx(Math.max(0, band.from));
      const x1 = sx(Math.min(xMax, band.to));
      out.push(`<rect x="${x0.toFixed(1)}" y="${top}" width="${(x1 - x0).toFixed(1)}" height="${CHART_H}" fill="#e8eef7"/>`);
      if (i === 0) out.push(`<text x="${((x0 + x1) / 2).toFixed(1)}" y="${top + 12}" text-anchor="middle" fill="#667" font-size="11">${esc(band.label)}</text>`);
    }
    for (const v of yTicks) {
      const y = sy(v).toFixed(1);
      out.push(`<line x1="${LEFT}" x2="${LEFT + plotW}" y1="${y}" y2="${y}" stroke="#e2e2e2"/>`);
      out.push(`<text x="${LEFT - 6}" y="${y}" text-anchor="end" dominant-baseline="middle" fill="#333">${fmtTick(v)}</text>`);
    }
    for (let m = 0; m <= xMax + 1e-9; m += xStep) {
      const x = sx(m).toFixed(1);
      out.push(`<line x1="${x}" x2="${x}" y1="${top}" y2="${bottom}" stroke="#eeeeee"/>`);
      out.push(`<text x="${x}" y="${bottom + 16}" text-anchor="middle" fill="#333">${fmtTick(m)}</text>`);
    }
    out.push(`<text x="${LEFT + plotW / 2}" y="${bottom + 34}" text-anchor="middle" fill="#333">time into the run (minutes)</text>`);
    out.push(
      `<text transform="translate(${LEFT - 52} ${top + CHART_H / 2}) rotate(-90)" text-anchor="middle" fill="#333">${esc(chart.unit)}${chart.log ? ' (log scale)' : ''}</text>`,
    );
    for (const mark of marks) {
      const x = sx(mark.x).toFixed(1);
      out.push(`<line x1="${x}" x2="${x}" y1="${top}" y2="${bottom}" stroke="#888" stroke-dasharray="2 3"/>`);
      if (i === 0) out.push(`<text x="${Number(x) + 4}" y="${top + 26}" fill="#666" font-size="11">${esc(mark.label)}</text>`);
    }
    for (const ref of chart.refs ?? []) {
      const y = sy(ref.y).toFixed(1);
      const x0 = ref.from === undefined ? LEFT : sx(ref.from);
      const x1 = ref.to === undefined ? LEFT + plotW : sx(Math.min(xMax, ref.to));
      out.push(`<line x1="${x0.toFixed(1)}" x2="${x1.toFixed(1)}" y1="${y}" y2="${y}" stroke="${ref.color}" stroke-width="${ref.from === undefined ? 1 : 2.5}" stroke-dasharray="6 4"/>`);
      out.push(`<text x="${(x1 - 4).toFixed(1)}" y="${Number(y) - 4}" text-anchor="end" fill="${ref.color}" font-size="11">${esc(ref.label)}</text>`);
    }
    for (const s of chart.series) {
      const pts = finite(s.points);
      if (!pts.length) continue;
      const path = pts.map(([x, y], k) => `${k ? 'L' : 'M'}${sx(x / 60).toFixed(1)} ${sy(y).toFixed(1)}`).join(' ');
      out.push(`<path d="${path}" fill="none" stroke="${s.color}" stroke-width="1.5"${s.dashed ? ' stroke-dasharray="4 3"' : ''}/>`);
      if (s.dots) for (const [x, y] of pts) out.push(`<circle cx="${sx(x / 60).toFixed(1)}" cy="${sy(y).toFixed(1)}" r="2.2" fill="${s.color}"/>`);
    }
    // Legend, on its own line under the title.
    let lx = LEFT;
    for (const s of chart.series) {
      out.push(`<line x1="${lx}" x2="${lx + 20}" y1="${top - 10}" y2="${top - 10}" stroke="${s.color}" stroke-width="2"${s.dashed ? ' stroke-dasharray="4 3"' : ''}/>`);
      if (s.dots) out.push(`<circle cx="${lx + 10}" cy="${top - 10}" r="2.2" fill="${s.color}"/>`);
      out.push(`<text x="${lx + 24}" y="${top - 6}" fill="#333" font-size="11">${esc(s.label)}</text>`);
      lx += 40 + s.label.length * 6.2;
    }
  });
  out.push('</svg>');
  return `${out.join('\n')}\n`;
}
