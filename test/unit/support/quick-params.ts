import { expect } from 'vitest';
import type { ZodType } from 'zod';

/**
 * A quick check of params (one that skips zod's parse on a hot path) against its schema, for one
 * input: what it passes, the schema passes and gives the same; what the schema refuses, it never
 * passes. Returns what the quick check gave.
 */
export function agreesWithSchema<T>(quick: (raw: unknown) => T | undefined, schema: ZodType, raw: Record<string, unknown>): T | undefined {
  const fast = quick(raw);
  const full = schema.safeParse(raw);
  if (fast !== undefined) {
    expect(full.success).toBe(true);
    expect(fast).toEqual(full.data);
  }
  if (!full.success) expect(fast).toBeUndefined();
  return fast;
}
