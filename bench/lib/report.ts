export type Op = '<=' | '<' | '>=' | '==';

export interface Metric {
  /** Which benchmark: exec, capture, sessions. */
  bench: string;
  name: string;
  value: number;
  unit: string;
  target?: { op: Op; value: number };
  /** Per-round values the headline is the median (or worst) of. */
  rounds?: number[];
  /** What the value is made of, in words: absolute times, baselines. */
  detail?: string;
}

export function passes(m: Metric): boolean | undefined {
  if (!m.target || !Number.isFinite(m.value)) return m.target ? false : undefined;
  const t = m.target.value;
  switch (m.target.op) {
    case '<=':
      return m.value <= t;
    case '<':
      return m.value < t;
    case '>=':
      return m.value >= t;
    case '==':
      return m.value === t;
  }
}

export function fmt(n: number, unit = ''): string {
  if (!Number.isFinite(n)) return 'n/a';
  const abs = Math.abs(n);
  if (unit === '' && Number.isInteger(n)) return String(n);
  const s = abs >= 100 ? n.toFixed(0) : abs >= 10 ? n.toFixed(1) : abs >= 1 ? n.toFixed(2) : n.toFixed(3);
  return unit ? `${s} ${unit}`.replace(' x', 'x') : s;
}

/** The compact table printed at the end: one row per metric, with its target and verdict. */
export function table(metrics: Metric[]): string {
  const rows = metrics.map((m) => {
    const verdict = passes(m);
    return [
      m.bench,
      m.name,
      fmt(m.value, m.unit),
      m.target ? `${m.target.op} ${fmt(m.target.value, m.unit)}` : '',
      verdict === undefined ? '' : verdict ? 'PASS' : 'MISS',
      m.detail ?? '',
    ];
  });
  const head = ['bench', 'metric', 'value', 'target', 'result', 'detail'];
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => (i === 5 ? 0 : r[i].length))));
  const line = (r: string[]) => r.map((c, i) => (i === 5 ? c : c.padEnd(widths[i]))).join('  ').trimEnd();
  return [line(head), line(widths.map((w) => '-'.repeat(w))), ...rows.map(line)].join('\n');
}
