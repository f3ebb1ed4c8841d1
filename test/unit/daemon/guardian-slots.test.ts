import { describe, expect, it } from 'vitest';
import { readSlots, slotLine, SLOT_BYTES, startedNear } from '../../../src/daemon/guardian-slots.js';

describe("the guardian's table", () => {
  it('a slot is one line of SLOT_BYTES; blank slots and torn ones are skipped', () => {
    const young = slotLine({ id: 'abcd1234', pgid: 4242, spawnedAt: 1_764_000_000_123 });
    const known = slotLine({ id: 'efgh5678', pgid: 99, startTime: 123_456 });
    for (const line of [young, known, slotLine(undefined)]) {
      expect(line).toHaveLength(SLOT_BYTES);
      expect(line.endsWith('\n')).toBe(true);
    }
    const table = young + slotLine(undefined) + known + 'zz 0 - -'.padEnd(SLOT_BYTES - 1) + '\n' + young.slice(0, 20);
    expect(readSlots(table)).toEqual([
      { id: 'abcd1234', pgid: 4242, spawnedAt: 1_764_000_000_123 },
      { id: 'efgh5678', pgid: 99, startTime: 123_456 },
    ]);
  });

  it('a slot rewritten in place keeps its length, whatever it held before', () => {
    const before = slotLine({ id: 'abcd1234', pgid: 4_194_304, spawnedAt: 1_764_000_000_123 });
    const after = slotLine({ id: 'abcd1234', pgid: 7, startTime: 1 });
    expect(after).toHaveLength(before.length);
    expect(readSlots(after)).toEqual([{ id: 'abcd1234', pgid: 7, startTime: 1 }]);
  });

  it("a young session's leader must have started within the slack of its spawn (boot time in s, start in 1/100 s)", () => {
    const stat = () => 'cpu  1 2 3\nbtime 1764000000\nprocesses 5\n';
    // Started 12.34 s after boot: 1764000012340 ms.
    expect(startedNear(1234, 1_764_000_012_340, 2000, stat)).toBe(true);
    expect(startedNear(1234, 1_764_000_013_900, 2000, stat)).toBe(true);
    // A PID reused by a process that started 5 s after the spawn.
    expect(startedNear(1734, 1_764_000_012_340, 2000, stat)).toBe(false);
    // No boot time to go by: never "the same".
    expect(startedNear(1234, 1_764_000_012_340, 2000, () => 'cpu 1\n')).toBe(false);
  });

  it("this machine's own processes: the current process started near when it says (the live /proc/stat)", async () => {
    const { readStat } = await import('../../../src/runner/procfs.js');
    const startedAt = Date.now() - process.uptime() * 1000;
    expect(startedNear(readStat(process.pid)!.startTime, startedAt)).toBe(true);
  });
});
