/** Small statistics helpers: samples are plain arrays of numbers (milliseconds unless noted). */

export function quantile(samples: readonly number[], q: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  // Nearest-rank: p99 of 500 samples is the 495th smallest, never an interpolation below a real sample.
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil(q * sorted.length)));
  return sorted[rank - 1];
}

export const median = (samples: readonly number[]) => quantile(samples, 0.5);
export const p99 = (samples: readonly number[]) => quantile(samples, 0.99);

export function round(n: number, digits = 2): number {
  const f = 10 ** digits;
  return Math.round(n * f) / f;
}

/** Milliseconds since an arbitrary origin, sub-microsecond resolution. */
export const now = () => performance.now();

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
