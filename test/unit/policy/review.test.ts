import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { loadBash } from '../../../src/shell/bash.js';
import { judgeCommand } from '../../../src/tools/approval/judge.js';

/** The approval action "review" (SPEC §16): deny > ask > review > allow, and a part that said review is kept for an asked command. */

beforeAll(loadBash);

const policy = (extra: Record<string, unknown> = {}) =>
  parseConfig({
    approvals: {
      rules: [
        { command: ['npm', 'install'], action: 'review' },
        { command: ['git', 'push'], action: 'ask' },
        { command: ['rm', '-r'], action: 'deny' },
      ],
      ...extra,
    },
  }).approvals;

describe('review as an approval action', () => {
  it('is laxer than ask and deny, stricter than allow', () => {
    const p = policy();
    expect(judgeCommand(p, 'npm install', 'default')).toMatchObject({ decision: 'review', review: { text: 'npm install' } });
    expect(judgeCommand(p, 'ls; npm install && echo ok', 'default')?.decision).toBe('review');
    const asked = judgeCommand(p, 'npm install && git push', 'default');
    expect(asked).toMatchObject({ decision: 'ask', decided: { text: 'git push' }, review: { text: 'npm install' } });
    const denied = judgeCommand(p, 'npm install; rm -r x', 'default');
    expect(denied?.decision).toBe('deny');
    // Nothing runs, so nothing is reviewed.
    expect(denied?.review).toBeUndefined();
    expect(judgeCommand(p, 'ls', 'default')).toMatchObject({ decision: 'allow' });
    expect(judgeCommand(p, 'ls', 'default')?.review).toBeUndefined();
  });

  it('approvals.default "review" reviews what no rule names; the config takes it and refuses what is not an action', () => {
    const p = policy({ default: 'review' });
    expect(judgeCommand(p, 'make all', 'default')?.decision).toBe('review');
    expect(judgeCommand(p, 'git push', 'default')?.decision).toBe('ask');
    expect(() => parseConfig({ approvals: { default: 'hold' } })).toThrow();
  });
});
