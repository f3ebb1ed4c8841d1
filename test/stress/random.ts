import { createHash } from 'node:crypto';

/** A small seeded PRNG (mulberry32): the same seed gives the same traffic and payloads. */
export function rng(seed: number): { next: () => number; int: (lo: number, hi: number) => number; pick: <T>(xs: readonly T[]) => T } {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const int = (lo: number, hi: number) => lo + Math.floor(next() * (hi - lo + 1));
  return { next, int, pick: (xs) => xs[Math.floor(next() * xs.length)] };
}

export const sha256 = (data: string | Buffer) => createHash('sha256').update(data).digest('hex');

/** The run's seed: PROCCTL_STRESS_SEED, else fast-check's fixed CI seed, else a fresh one (printed by the caller). */
export function runSeed(globalSeed: number | undefined): number {
  const fromEnv = Number(process.env.PROCCTL_STRESS_SEED);
  if (Number.isInteger(fromEnv) && fromEnv > 0) return fromEnv;
  return globalSeed ?? ((Date.now() ^ (process.pid << 8)) >>> 0);
}

/** The p-th percentile (0..100) of a list of numbers, nearest rank. */
export function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[rank];
}
