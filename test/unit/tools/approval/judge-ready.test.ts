import { describe, expect, it } from 'vitest';
import { parseConfig } from '../../../../src/config/load.js';
import { judgeCommand, judgeReady } from '../../../../src/tools/approval/judge.js';

/**
 * The bash parser of the approval rules is loaded once the daemon serves, not while it starts
 * (docs/durability.md "What the image leaves for later"): whatever judges a command waits for it
 * first (`judgeReady`), and a policy that judges nothing never waits nor loads it. This file's
 * module graph is its own, so the parser is not loaded when it begins.
 */
describe('judging waits for the bash parser', () => {
  it('a policy that judges nothing has nothing to wait for; one with rules waits for the load, then judges in the same turn', async () => {
    const open = parseConfig({}).approvals;
    expect(judgeReady(open)).toBeUndefined();
    expect(judgeCommand(open, 'rm -rf build', 'default')).toBeUndefined();
    const ruled = parseConfig({ approvals: { rules: [{ command: ['rm', '-r|-R|--recursive'], action: 'deny' }] } }).approvals;
    // Not loaded yet: judging now would have no parser.
    expect(() => judgeCommand(ruled, 'rm -rf build', 'default')).toThrow(/not loaded yet/);
    const loading = judgeReady(ruled);
    expect(loading).toBeInstanceOf(Promise);
    await loading;
    expect(judgeReady(ruled)).toBeUndefined();
    expect(judgeCommand(ruled, "r''m -rf build", 'default')?.decision).toBe('deny');
    expect(judgeCommand(ruled, 'ls build', 'default')?.decision).toBe('allow');
  });
});
