import { setImmediate as turn } from 'node:timers/promises';
import { beforeEach, describe, expect, it, vi } from 'vitest';

// The rule of base/yield-cpu.ts: an answer yields only in a turn in which a session ended. The
// system call itself is the addon's, tested in yield-cpu.test.ts; here the addon counts calls.
const yields = vi.hoisted(() => ({ n: 0 }));
vi.mock('../../../src/base/addon.js', () => ({
  loadAddon: () => ({ yieldCpu: () => void yields.n++ }),
}));

const { answered, yieldAfterAnswers } = await import('../../../src/base/yield-cpu.js');
const { makeSession } = await import('../session/make-session.js');

describe('answers yield only in a turn in which a session ended', () => {
  beforeEach(async () => {
    await turn();
    yields.n = 0;
  });

  it('an answer in a turn without an end does not yield', () => {
    answered();
    answered();
    expect(yields.n).toBe(0);
  });

  it("a session's end makes each answer of its turn yield, and none of the next turn", async () => {
    const s = makeSession('s1', 'default');
    s.finish({ exitCode: 0, signal: null });
    answered();
    answered();
    expect(yields.n).toBe(2);
    await turn();
    answered();
    expect(yields.n).toBe(2);
  });

  it('told twice in one turn, it is owed once: the next turn is clear', async () => {
    yieldAfterAnswers();
    yieldAfterAnswers();
    await turn();
    answered();
    expect(yields.n).toBe(0);
  });
});
