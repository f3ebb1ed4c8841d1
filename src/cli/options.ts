import { InvalidArgumentError } from 'commander';

/** A commander parser for a whole number of at least `min`. */
export function wholeNumber(min = 0): (value: string) => number {
  return (value) => {
    if (!/^\d+$/.test(value.trim())) throw new InvalidArgumentError(`expected a whole number, got "${value}"`);
    const n = Number(value);
    if (n < min) throw new InvalidArgumentError(`expected at least ${min}, got ${n}`);
    return n;
  };
}

/** A commander parser for a non-negative number (seconds may have a fraction). */
export function nonNegative(value: string): number {
  const n = Number(value);
  if (value.trim() === '' || !Number.isFinite(n) || n < 0) throw new InvalidArgumentError(`expected a number of at least 0, got "${value}"`);
  return n;
}

/** Collects repeated `--env K=V` into an object. */
export function envPair(value: string, previous: Record<string, string> = {}): Record<string, string> {
  const eq = value.indexOf('=');
  if (eq <= 0) throw new InvalidArgumentError(`expected NAME=VALUE, got "${value}"`);
  return { ...previous, [value.slice(0, eq)]: value.slice(eq + 1) };
}

const SIZE_UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3, t: 1024 ** 4 };

/** A commander parser for a size in bytes: a whole number with an optional K, M, G or T (powers of 1024). */
export function byteSize(value: string): number {
  const m = /^(\d+)\s*([kmgt]?)(i?b)?$/i.exec(value.trim());
  if (!m) throw new InvalidArgumentError(`expected a size such as 512M or 2G, got "${value}"`);
  return Number(m[1]) * SIZE_UNITS[m[2].toLowerCase()];
}
