import { describe, expect, it } from 'vitest';
import { cliDaemon, type CliDaemon } from './run.js';

let x: CliDaemon;
cliDaemon((shared) => (x = shared));

describe('procctl exec --yield-on-quiet (SPEC §20)', () => {
  it('returns once the command printed nothing for MS, leaving it running', async () => {
    const r = await x.run(['exec', '--yield-on-quiet', '300', '--', 'echo up; sleep 60']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^up\nSession (\S+) is still running/);
    expect(r.stderr).toContain('no output for 300 ms (--yield-on-quiet)');
    const id = /Session (\S+) is still running/.exec(r.stdout)![1];
    const killed = await x.run(['kill', id]);
    expect(killed.code).toBe(0);
  });

  it('--json says which ended the wait', async () => {
    const r = await x.run(['--json', 'exec', '--yield-on-quiet', '200', '--', 'sleep 60']);
    const j = JSON.parse(r.stdout);
    expect(j).toMatchObject({ status: 'running', yielded: 'quiet' });
    await x.run(['kill', j.sessionId]);
  });

  it('a command that ends first is simply done', async () => {
    const r = await x.run(['exec', '--yield-on-quiet', '5000', '--', 'echo done']);
    expect(r).toMatchObject({ code: 0, stdout: 'done\n' });
  });

  it('refuses a value out of bounds, and --bg beside it', async () => {
    const low = await x.run(['exec', '--yield-on-quiet', '5', '--', 'true']);
    expect(low.code).toBe(2);
    expect(low.stderr).toContain('expected at least 10');
    const both = await x.run(['exec', '--bg', '--yield-on-quiet', '100', '--', 'true']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('--bg returns at once');
  });
});
