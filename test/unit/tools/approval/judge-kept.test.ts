import { beforeAll, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../../src/config/load.js';
import type { RememberedRule } from '../../../../src/policy/remembered.js';
import { judgeCommand, judgeReady } from '../../../../src/tools/approval/judge.js';

/**
 * A line judged lately is not parsed and judged again (tools/approval/judge.ts), but its kept
 * judgement is given only where everything it depends on is the same: the policy (a reload makes
 * a new one), the scope, and the list of remembered answers.
 */
const rules = parseConfig({
  approvals: {
    rules: [
      { match: '\\bterraform\\s+apply\\b', action: 'ask' },
      { command: ['git', 'push'], action: 'deny', scopes: ['ci'] },
    ],
  },
}).approvals;

beforeAll(async () => {
  await judgeReady(rules);
});

describe('a judgement kept for a line judged lately', () => {
  it('is given again for the same line, policy, scope and remembered answers', () => {
    const first = judgeCommand(rules, 'terraform apply -auto-approve', 'default', []);
    expect(first?.decision).toBe('ask');
    const remembered: RememberedRule[] = [];
    const a = judgeCommand(rules, 'ls -la', 'default', remembered);
    expect(judgeCommand(rules, 'ls -la', 'default', remembered)).toBe(a);
    // No remembered answers given: none, the same each time.
    expect(judgeCommand(rules, 'pwd', 'default')).toBe(judgeCommand(rules, 'pwd', 'default'));
  });

  it('is not given to another scope, whose rules differ', () => {
    const none: RememberedRule[] = [];
    expect(judgeCommand(rules, 'git push origin main', 'default', none)?.decision).toBe('allow');
    expect(judgeCommand(rules, 'git push origin main', 'ci', none)?.decision).toBe('deny');
    expect(judgeCommand(rules, 'git push origin main', 'default', none)?.decision).toBe('allow');
  });

  it('is let go once a person remembered an answer for the line', () => {
    const before: RememberedRule[] = [];
    expect(judgeCommand(rules, 'terraform apply', 'default', before)?.decision).toBe('ask');
    const after: RememberedRule[] = [{ scope: 'default', kind: 'command', words: ['terraform', 'apply'], at: Date.now(), from: 'terraform apply' }];
    const judged = judgeCommand(rules, 'terraform apply', 'default', after);
    expect(judged?.decision).toBe('allow');
    expect(judged?.decided.reason).toMatch(/remembered answer 1/);
  });

  it('is not given under a reloaded policy', async () => {
    const none: RememberedRule[] = [];
    expect(judgeCommand(rules, 'make deploy', 'default', none)?.decision).toBe('allow');
    const reloaded = parseConfig({ approvals: { rules: [{ match: '\\bdeploy\\b', action: 'deny' }] } }).approvals;
    await judgeReady(reloaded);
    expect(judgeCommand(reloaded, 'make deploy', 'default', none)?.decision).toBe('deny');
  });
});
