import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import { cli, killChildren } from './run.js';

/**
 * The operator's commands from the CLI (SPEC §8): scope "*" with the adminToken, or where the
 * daemon has none the approver credential, found as the console finds it ($PROCCTL_ADMIN_TOKEN,
 * `--scope '*' --token`, $PROCCTL_APPROVER_TOKEN, the file beside the socket).
 */

const sha256 = (text: string) => `sha256:${createHash('sha256').update(text).digest('hex')}`;
/** No credential from the test's own environment. */
const BARE = { PROCCTL_ADMIN_TOKEN: '', PROCCTL_APPROVER_TOKEN: '' };

afterAll(async () => {
  killChildren();
  await stopAllDaemons();
});

const on = (d: TestDaemon) => (args: string[], env: Record<string, string> = {}) => cli(['--socket', d.socket, ...args], { env: { ...BARE, ...env } });

describe('a default daemon (no config): the approver credential beside the socket is the operator', () => {
  it('audit verify, --scope * ps and kill, history --of-scope and --scope * history all answer', async () => {
    const d = await startDaemon();
    const run = on(d);
    const c = await d.client();
    const mine = await c.exec({ command: 'sleep 600', background: true, scope: 'here' });
    const theirs = await c.exec({ command: 'echo elsewhere-ran', scope: 'elsewhere' });
    c.close();

    const verify = await run(['audit', 'verify']);
    expect(verify.stderr).toBe('');
    expect(verify.code).toBe(0);
    expect(verify.stdout).toMatch(/^The audit trail is whole: \d+ records in 1 file\./);

    const ps = await run(['--scope', '*', 'ps']);
    expect(ps.code, ps.stderr).toBe(0);
    expect(ps.stdout).toMatch(new RegExp(`^${mine.sessionId}\\s+here\\s+running`, 'm'));
    expect(ps.stdout).toMatch(new RegExp(`^${theirs.sessionId}\\s+elsewhere\\s+completed`, 'm'));

    const history = await run(['history', '--of-scope', 'elsewhere']);
    expect(history.code, history.stderr).toBe(0);
    expect(history.stdout).toContain(theirs.sessionId);
    expect(history.stdout).not.toContain(mine.sessionId);
    const all = await run(['--scope', '*', 'history']);
    expect(all.stdout).toContain(mine.sessionId);

    const kill = await run(['--scope', '*', 'kill', mine.sessionId]);
    expect(kill.code, kill.stderr).toBe(0);
    await d.stop();
  });
});

describe('a configured (hashed) approvals.approverToken: $PROCCTL_APPROVER_TOKEN is the operator', () => {
  it('answers with it, and refuses without it or with a wrong one, naming what to set', async () => {
    const d = await startDaemon({ config: { approvals: { approverToken: sha256('appr0ver') } } });
    const run = on(d);
    const c = await d.client();
    const r = await c.exec({ command: 'echo configured', scope: 'there' });
    c.close();

    const verify = await run(['audit', 'verify'], { PROCCTL_APPROVER_TOKEN: 'appr0ver' });
    expect(verify.code, verify.stderr).toBe(0);
    const ps = await run(['--scope', '*', 'ps'], { PROCCTL_APPROVER_TOKEN: 'appr0ver' });
    expect(ps.code, ps.stderr).toBe(0);
    expect(ps.stdout).toMatch(new RegExp(`^${r.sessionId}\\s+there\\s+completed`, 'm'));

    for (const env of [{}, { PROCCTL_APPROVER_TOKEN: 'not-it' }]) {
      for (const args of [['audit', 'verify'], ['--scope', '*', 'ps']]) {
        const refused = await run(args, env);
        expect(refused.code).toBe(1);
        expect(refused.stdout).toBe('');
        expect(refused.stderr).toMatch(/scope "\*" \(every scope\) needs the daemon's adminToken/);
        expect(refused.stderr).toMatch(/To act as the operator, set \$PROCCTL_ADMIN_TOKEN .*\$PROCCTL_APPROVER_TOKEN to its approver credential/);
      }
    }
    await d.stop();
  });
});

describe('a configured adminToken: only it is the operator', () => {
  it('$PROCCTL_ADMIN_TOKEN and --token answer; the approver credential alone is refused, naming $PROCCTL_ADMIN_TOKEN', async () => {
    const d = await startDaemon({ config: { adminToken: sha256('0perator') } });
    const run = on(d);
    expect((await run(['audit', 'verify'], { PROCCTL_ADMIN_TOKEN: '0perator' })).code).toBe(0);
    expect((await run(['--scope', '*', '--token', '0perator', 'ps'])).code).toBe(0);
    // The flag goes before the variable, as in the console.
    expect((await run(['--scope', '*', '--token', '0perator', 'ps'], { PROCCTL_ADMIN_TOKEN: 'stale' })).code).toBe(0);
    const refused = await run(['--scope', '*', 'ps']);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toMatch(/needs the adminToken.*To act as the operator, set \$PROCCTL_ADMIN_TOKEN to the daemon's adminToken/s);
    await d.stop();
  });
});
