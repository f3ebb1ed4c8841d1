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
