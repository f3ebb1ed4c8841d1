import { describe, expect, it } from 'vitest';
import type { TestClient } from '../helpers/rpc.js';
import { cliDaemon, type CliDaemon } from './run.js';

let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ run, c } = x), {
  config: {
    approvals: {
      rules: [
        { match: 'needs-ok', action: 'ask', reason: 'touches production' },
        { match: 'forbidden', action: 'deny', reason: 'not here' },
      ],
    },
  },
});

/** The row of `procctl ps` for this session. */
const psRow = (stdout: string, id: string) => stdout.split('\n').find((l) => l.startsWith(id)) ?? '';

describe('approvals from the CLI', () => {
  it('exec of a command that needs approval: says so in CLI words, exits 1, and ps shows approval_required', async () => {
    const r = await run(['exec', '--', 'echo needs-ok']);
    expect(r.code).toBe(1);
    const id = /Session (\S+) has not started: it needs approval before it runs \(echo needs-ok \(rule 0: touches production\)\)/.exec(r.stdout)?.[1];
    expect(id, r.stdout).toBeDefined();
    expect(r.stdout).toContain(`procctl resume ${id} --yes`);
    expect(r.stdout).toContain(`procctl resume ${id} --no`);
    expect(r.stdout + r.stderr).not.toContain('sessionId');
    const ps = await run(['ps']);
    expect(psRow(ps.stdout, id!)).toMatch(/approval_required\s+-\s/);
    await c.process({ action: 'remove', sessionId: id });
  });

  it('resume --yes runs it and prints what exec would (its output, its exit status)', async () => {
    const asked = await c.exec({ command: 'echo needs-ok here; exit 4' });
    expect(asked.status).toBe('approval_required');
    const r = await run(['resume', asked.sessionId, '--yes']);
    expect(r.stdout).toBe('needs-ok here\n');
    expect(r.stderr).toContain('(Command exited with code 4)');
    expect(r.code).toBe(4);
    const ok = await c.exec({ command: 'echo needs-ok fine' });
    const r2 = await run(['resume', ok.sessionId, '--yes']);
    expect(r2).toMatchObject({ code: 0, stdout: 'needs-ok fine\n' });
  });

  it('resume --no denies it (exit 0: the answer was given), and ps says why', async () => {
    const asked = await c.exec({ command: 'echo needs-ok' });
    const r = await run(['resume', asked.sessionId, '--no']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('refused');
    const ps = await run(['ps']);
    expect(psRow(ps.stdout, asked.sessionId)).toContain('denied (refused)');
    const again = await run(['resume', asked.sessionId, '--yes']);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('no pending interrupt');
  });

  it('exec of a denied command: exit 1 with the reason', async () => {
    const r = await run(['exec', '--', 'echo forbidden']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('not here');
    expect(r.stdout).toBe('');
  });
});
