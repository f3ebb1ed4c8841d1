import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { cliDaemon, type CliDaemon } from './run.js';

let run: CliDaemon['run'];
cliDaemon((x) => ({ run } = x), {
  config: {
    approvals: {
      rules: [
        { command: ['rm', '-r|-R|--recursive'], action: 'deny', reason: 'recursive delete' },
        { command: ['deploy'], action: 'ask', scopes: ['ci'] },
      ],
    },
  },
});

const dir = mkdtempSync(join(tmpdir(), 'procctl-policy-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('procctl policy check', () => {
  it('explains part by part which rule decides, exits 0, and runs nothing', async () => {
    const mark = join(dir, 'ran');
    const r = await run(['policy', 'check', '--', `touch ${mark} && sudo rm -rf build`]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('deny: it would be denied, and nothing would run (decided by: sudo rm -rf build (rule 0: recursive delete))');
    expect(r.stdout).toMatch(/allow\s+touch .*ran: no rule matches it/);
    expect(existsSync(mark)).toBe(false);
  });

  it('--json answers the decision and its parts; --scope judges in that scope', async () => {
    const json = JSON.parse((await run(['--json', 'policy', 'check', '--', 'deploy now'])).stdout);
    expect(json.decision).toBe('allow');
    const ci = JSON.parse((await run(['--json', '--scope', 'ci', 'policy', 'check', '--', 'deploy now'])).stdout);
    expect(ci).toMatchObject({ decision: 'ask', parts: [{ text: 'deploy now', decision: 'ask', rule: 1 }] });
  });

  it('several words are an argument vector, as for exec', async () => {
    const r = JSON.parse((await run(['--json', 'policy', 'check', '--', 'rm', '-r', 'a b'])).stdout);
    expect(r).toMatchObject({ decision: 'deny', parts: [{ text: "rm -r 'a b'" }] });
  });
});
