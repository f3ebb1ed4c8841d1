import { describe, expect, it } from 'vitest';
import type { TestClient } from '../helpers/rpc.js';
import { cliDaemon, type CliDaemon } from './run.js';

let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ run, c } = x), { config: { scopes: { ops: { elevated: 'allow' }, careful: { elevated: 'ask' } } } });

describe('procctl exec --elevated', () => {
  it("is refused where the scope's policy denies it (the default), naming the key to change", async () => {
    const r = await run(['exec', '--elevated', '--', 'echo should-not-run']);
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toContain('elevated mode is denied for scope "default"');
    expect(r.stderr).toContain('scopes.default.elevated');
  });

  it('runs where the policy allows it, and the session says it ran elevated', async () => {
    const r = await run(['--scope', 'ops', 'exec', '--elevated', '--', 'echo ran-elevated']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('ran-elevated\n');
  });

  it('waits for a person where the policy asks: exit 1 with how to approve it', async () => {
    const r = await run(['--scope', 'careful', 'exec', '--elevated', '--', 'echo after-approval']);
    expect(r.code).toBe(1);
    const id = /Session (\S+) has not started/.exec(r.stdout)?.[1];
    expect(id, r.stdout).toBeDefined();
    expect(r.stdout).toContain(`procctl --scope careful resume ${id} --yes`);
    await c.process({ action: 'remove', sessionId: id, scope: 'careful' });
  });
});
