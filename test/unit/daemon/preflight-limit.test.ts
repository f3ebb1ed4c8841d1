import { describe, expect, it } from 'vitest';
import { preflightLimitMs } from '../../../src/daemon/handover/out.js';

/**
 * The pre-flight of a planned restart (docs/durability.md "The pre-flight's bound") is about a
 * second of CPU: its bound stretches with the tasks that share each core, so a loaded machine
 * does not refuse a restart that would have gone through, and stays bounded.
 */
describe("the pre-flight's bound", () => {
  it('is 20 s with a core to spare, stretched by the load per core, at most 5 min', () => {
    expect(preflightLimitMs(0.3, 2)).toBe(20_000);
    expect(preflightLimitMs(2, 2)).toBe(20_000);
    expect(preflightLimitMs(8, 2)).toBe(80_000);
    // The CI-like load that refused a restart with a fixed 20 s.
    expect(preflightLimitMs(45, 2)).toBe(300_000);
    expect(preflightLimitMs(45, 64)).toBe(20_000);
    expect(preflightLimitMs(5, 0)).toBe(100_000);
  });
});
