import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { logLines } from '../helpers/state.js';

afterAll(async () => {
  await stopAllDaemons();
});

const reloads = (d: TestDaemon) => logLines(d.stdout()).filter((l) => /config reloaded|reload rejected/.test(l.msg)).length;

/** Write `config`, SIGHUP, and wait for the daemon to say it took it (or refused it). */
async function reload(d: TestDaemon, config: unknown): Promise<void> {
  const before = reloads(d);
  writeFileSync(join(d.dir, 'config.json'), JSON.stringify(config));
  d.proc.kill('SIGHUP');
  await waitFor(() => reloads(d) > before || undefined, { what: 'the reload' });
  const last = logLines(d.stdout()).filter((l) => /config reloaded|reload rejected/.test(l.msg)).at(-1);
  expect(last?.msg, JSON.stringify(last)).toMatch(/config reloaded/);
}

/** A scope whose network names credentials (SPEC §21): daemon.status names them, never their values. */
const withCredentials = (name: string) => ({ scopes: { fetcher: { network: { allow: ['127.0.0.2'], credentials: [{ name, hosts: ['127.0.0.1'], value: 'Bearer never-shown-5e1f' }] } } } });

describe('daemon.status after a reload', () => {
  // daemon.status keeps what follows from the config alone (the sandbox's section, the env
  // counts) by config object: each ask after a reload must say the new config, never the kept one.
  it('says the sandbox section and credentials of the config now in force, each time it changes', async () => {
    const d = await startDaemon({ config: {}, env: { PROCCTL_LOG_LEVEL: 'info' } });
    const c = await d.client();
    const status = async () => (await c.call('daemon.status')) as any;

    const first = await status();
    expect(first.sandbox.mode).toBe('off');
    expect(first.sandbox.credentials).toBeUndefined();
    // Asked again: the same answer (now from what was kept).
    expect((await status()).sandbox).toEqual(first.sandbox);

    await reload(d, withCredentials('API'));
    const second = await status();
    expect(second.sandbox.credentials?.map((x: any) => x.name)).toEqual(['API']);
    expect(second.sandbox.credentials[0]).toMatchObject({ hosts: ['127.0.0.1'], variable: 'PROCCTL_CRED_API', scopes: ['fetcher'] });
    expect((await status()).sandbox.credentials?.map((x: any) => x.name)).toEqual(['API']);

    await reload(d, withCredentials('OTHER'));
    expect((await status()).sandbox.credentials?.map((x: any) => x.name)).toEqual(['OTHER']);

    // Back to a config without credentials (an equal one, but a new object): none named.
    await reload(d, {});
    const last = await status();
    expect(last.sandbox.credentials).toBeUndefined();
    expect(last.sandbox).toEqual(first.sandbox);
    expect(JSON.stringify(last)).not.toContain('never-shown');
    c.close();
  });
});
