import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';

afterAll(stopAllDaemons);

/** The daemon's environment gets these on top of the test runner's. */
const SECRETS = {
  OPENAI_API_KEY: 'sk-never-inherited',
  GITHUB_TOKEN: 'ghp-included',
  db_password: 'hunter2',
  SSLKEYLOGFILE: '/tmp/keys.log',
  AWS_SECRET_ACCESS_KEY: 'aws-secret',
  PROCCTL_TEST_HARMLESS: 'plain',
};

/** What the default exclude list withholds, written independently of the daemon's globs. */
const withheldByDefault = (name: string, include: string[]) =>
  (/KEY|SECRET|TOKEN|PASSWORD|CREDENTIAL/i.test(name) || /^SSLKEYLOGFILE$/i.test(name)) && !include.includes(name);

async function childEnv(s: Scoped, extra: Record<string, unknown> = {}): Promise<Record<string, string>> {
  const r = await s.exec({ command: 'env -0', ...extra });
  expect(r.status).toBe('completed');
  return Object.fromEntries(
    r.output
      .split('\0')
      .filter(Boolean)
      .map((kv: string) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

describe('inherited secrets', () => {
  it('are withheld from sessions, included ones are kept, an explicit env wins, status counts them, and SIGHUP applies a new policy', async () => {
    const d = await startDaemon({ env: { ...SECRETS, PROCCTL_LOG_LEVEL: 'info' }, config: { env: { include: ['GITHUB_TOKEN'] } } });
    const s = new Scoped(await d.client(), 'secrets');

    const env = await childEnv(s);
    for (const name of ['OPENAI_API_KEY', 'db_password', 'SSLKEYLOGFILE', 'AWS_SECRET_ACCESS_KEY']) expect(env[name], name).toBeUndefined();
    expect(env.GITHUB_TOKEN).toBe('ghp-included');
    expect(env.PROCCTL_TEST_HARMLESS).toBe('plain');
    // The session's own variables are not inherited, so no policy touches them.
    expect(env.PROCCTL_CHECKPOINT_KEY).toMatch(/.+/);

    // The caller can always pass a value explicitly.
    expect((await childEnv(s, { env: { OPENAI_API_KEY: 'given-by-the-caller' } })).OPENAI_API_KEY).toBe('given-by-the-caller');

    const daemonEnv = { ...process.env, ...SECRETS };
    const expected = Object.keys(daemonEnv).filter((n) => withheldByDefault(n, ['GITHUB_TOKEN'])).length;
    const status = await s.c.call('daemon.status');
    expect(status.env).toEqual({ withheld: expected });
    expect(JSON.stringify(status)).not.toContain('sk-never-inherited');

    // Reload: nothing excluded any more.
    writeFileSync(join(d.dir, 'config.json'), JSON.stringify({ env: { exclude: [] } }));
    d.proc.kill('SIGHUP');
    await waitFor(async () => (await s.c.call('daemon.status')).env.withheld === 0 || undefined, { what: 'the new env policy' });
    expect((await childEnv(s)).OPENAI_API_KEY).toBe('sk-never-inherited');
  });
});
