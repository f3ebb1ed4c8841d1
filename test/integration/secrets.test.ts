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

/** What the default policy withholds (SPEC §8), written independently of the daemon's globs: by name, or by a value that is a credential. */
const withheldByDefault = (name: string, value: string, include: string[]) =>
  (/KEY|SECRET|TOKEN|PASS|CREDENTIAL|AUTH|DSN|COOKIE|SESSION|JWT|PRIVATE|WEBHOOK|CONNECTION_STRING/i.test(name) ||
    /_PWD$/i.test(name) ||
    /^(SSH_AUTH_SOCK|GPG_AGENT_INFO|KUBECONFIG|DOCKER_AUTH_CONFIG|NETRC|SSLKEYLOGFILE)$/i.test(name) ||
    /^\w[\w+.-]*:\/\/[^/@\s:]*:[^/@\s]+@/.test(value) ||
    /^(bearer|basic)\s+\S{8,}/i.test(value) ||
    value.includes('PRIVATE KEY-----')) &&
  !include.includes(name);

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
    const expected = Object.entries(daemonEnv).filter(([n, v]) => withheldByDefault(n, v ?? '', ['GITHUB_TOKEN'])).length;
    const status = await s.c.call('daemon.status');
    expect(status.env).toEqual({ withheld: expected });
    expect(JSON.stringify(status)).not.toContain('sk-never-inherited');

    // Reload: nothing excluded any more.
    writeFileSync(join(d.dir, 'config.json'), JSON.stringify({ env: { exclude: [] } }));
    d.proc.kill('SIGHUP');
    const byValue = Object.entries(daemonEnv).filter(([n, v]) => withheldByDefault('', v ?? '', []) && n).length;
    await waitFor(async () => (await s.c.call('daemon.status')).env.withheld === byValue || undefined, { what: 'the new env policy' });
    expect((await childEnv(s)).OPENAI_API_KEY).toBe('sk-never-inherited');
  });

  it('the corpus: 59 secret-bearing names and credential values are withheld by default; everyday variables are kept; env.inherit "core" passes the core set only', async () => {
    const corpus: Record<string, string> = {};
    const names = [
      'DATABASE_URL', 'MYSQL_PWD', 'DB_PASSWD', 'SENTRY_DSN', 'SLACK_WEBHOOK_URL', 'HTTPS_PROXY', 'SSH_AUTH_SOCK', 'KUBECONFIG',
      'BORG_PASSPHRASE', 'NPM_CONFIG__AUTH', 'OPENAI_API_KEY', 'ANTHROPIC_API_KEY', 'GITHUB_TOKEN', 'GH_TOKEN', 'GITLAB_TOKEN',
      'AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'GOOGLE_APPLICATION_CREDENTIALS', 'AZURE_CLIENT_SECRET',
      'STRIPE_SECRET_KEY', 'TWILIO_AUTH_TOKEN', 'PGPASSWORD', 'REDIS_PASSWORD', 'MONGODB_URI', 'POSTGRES_PASSWORD',
      'DOCKER_AUTH_CONFIG', 'NETRC', 'GPG_AGENT_INFO', 'SSLKEYLOGFILE', 'JWT_SIGNING_SECRET', 'SESSION_COOKIE_SECRET',
      'COOKIE_SECRET', 'PRIVATE_KEY', 'SSH_PRIVATE_KEY', 'DISCORD_WEBHOOK', 'AZURE_STORAGE_CONNECTION_STRING', 'VAULT_TOKEN',
      'CONSUL_HTTP_TOKEN', 'NPM_TOKEN', 'PYPI_PASSWORD', 'TWINE_PASSWORD', 'CARGO_REGISTRY_TOKEN', 'HF_TOKEN', 'HUGGING_FACE_HUB_TOKEN',
      'DIGITALOCEAN_ACCESS_TOKEN', 'CLOUDFLARE_API_TOKEN', 'HEROKU_API_KEY', 'SENDGRID_API_KEY', 'MAILGUN_API_KEY',
      'DD_API_KEY', 'NEW_RELIC_LICENSE_KEY', 'BASIC_AUTH', 'OAUTH_CLIENT_SECRET', 'RABBITMQ_URL', 'AMQP_URL', 'CELERY_BROKER_URL',
      'ELASTIC_PASSWORD', 'X_API_AUTHORIZATION',
    ];
    expect(names).toHaveLength(59);
    for (const name of names) corpus[name] = `value-of-${name.toLowerCase()}`;
    // Where the name says nothing, the value does.
    Object.assign(corpus, {
      DATABASE_URL: 'postgres://app:hunter2@db.internal:5432/app',
      HTTPS_PROXY: 'http://proxyuser:proxypass@proxy.internal:3128',
      RABBITMQ_URL: 'amqp://guest:guest@mq.internal:5672',
      AMQP_URL: 'amqps://u:p@mq.internal',
      CELERY_BROKER_URL: 'redis://:redispass@cache.internal:6379/0',
      MONGODB_URI: 'mongodb+srv://admin:pw@cluster0.example.net',
      X_API_AUTHORIZATION: 'Bearer abcdefghijklmnop',
    });
    const plain = {
      HTTP_PROXY: 'http://proxy.internal:3128',
      NO_PROXY: 'localhost,127.0.0.1',
      EDITOR: 'vi',
      PROCCTL_TEST_HARMLESS: 'plain',
      LANG: 'C.UTF-8',
      LC_ALL: 'C.UTF-8',
      TZ: 'UTC',
      PAGER: 'less',
      HOMEPAGE_URL: 'https://example.org/',
      PWD_HINT: 'keep',
    };
    const d = await startDaemon({ env: { ...corpus, ...plain } });
    const env = await childEnv(new Scoped(await d.client(), 'corpus'));
    const leaked = names.filter((n) => env[n] !== undefined);
    expect(leaked).toEqual([]);
    for (const [name, value] of Object.entries(plain)) expect(env[name], name).toBe(value);
    for (const name of ['PATH', 'HOME']) expect(env[name], name).toBe(process.env[name]);
    const status = await (await d.client()).call('daemon.status');
    expect(JSON.stringify(status)).not.toContain('hunter2');
    expect(status.env.withheld).toBeGreaterThanOrEqual(59);

    const core = await startDaemon({ env: { ...corpus, ...plain }, config: { env: { inherit: 'core', include: ['EDITOR'] } } });
    const coreEnv = await childEnv(new Scoped(await core.client(), 'core'));
    // PWD, SHLVL and _ are the shell's own.
    const shells = new Set(['PWD', 'OLDPWD', 'SHLVL', '_']);
    expect(Object.keys(coreEnv).filter((n) => !n.startsWith('PROCCTL_') && !shells.has(n)).sort()).toEqual(
      Object.keys({ ...process.env, ...plain })
        .filter((n) => /^(HOME|USER|LOGNAME|PATH|SHELL|LANG|LC_\w+|TERM|TZ|TMPDIR|EDITOR)$/.test(n))
        .sort(),
    );
  });
});
