import { describe, expect, it } from 'vitest';
import { VisitSchedule } from '../../../src/interrupt/schedule.js';

describe('VisitSchedule', () => {
  it('gives each id once, at the first call at or after its time', () => {
    const s = new VisitSchedule(50);
    s.at('a', 1010);
    s.at('b', 1060);
    s.at('c', 1099);
    expect(s.due(1000)).toEqual([]);
    expect(s.due(1010)).toEqual(['a']);
    expect(s.due(1059)).toEqual([]);
    expect(s.due(1060).sort()).toEqual(['b']);
    expect(s.due(1200)).toEqual(['c']);
    expect(s.due(5000)).toEqual([]);
    expect(s.size).toBe(0);
  });

  it('an earlier time replaces a later one; a later one leaves the earlier in place', () => {
    const s = new VisitSchedule(50);
    s.at('a', 3000);
    s.at('a', 1000);
    s.at('a', 2000);
    expect(s.due(1000)).toEqual(['a']);
    expect(s.due(4000)).toEqual([]);
  });

  it('never plans an infinite time, and clear forgets everything', () => {
    const s = new VisitSchedule(50);
    s.at('a', Number.POSITIVE_INFINITY);
    s.at('b', 100);
    expect(s.size).toBe(1);
    s.clear();
    expect(s.due(1e12)).toEqual([]);
  });
});

describe('VisitSchedule, in any order of times', () => {
  it('gives every id once, at the first call at or after its latest earliest time, whatever order they were planned in', () => {
    // A pseudo-random walk of plans and ticks against the plain rule it must follow.
    let seed = 7;
    const rnd = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    const s = new VisitSchedule(50);
    const want = new Map<string, number>();
    let now = 0;
    for (let step = 0; step < 5000; step++) {
      if (rnd(3) > 0) {
        const id = `s${rnd(300)}`;
        const at = now + rnd(rnd(2) ? 200 : 100_000);
        s.at(id, at);
        const before = want.get(id);
        if (before === undefined || at < before) want.set(id, at);
      } else {
        now += rnd(120);
        const due = [...s.due(now)].sort();
        const expected = [...want].filter(([, at]) => at <= now).map(([id]) => id).sort();
        expect(due).toEqual(expected);
        for (const id of due) want.delete(id);
      }
    }
    expect(s.size).toBe(want.size);
  });
});
