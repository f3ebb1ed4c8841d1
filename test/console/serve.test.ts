import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';
import { CHROMIUM, daemonAt, startConsole, stopAllConsoles, stopPlacedDaemons, launchBrowser } from './console.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-ui-serve-'));

afterAll(async () => {
  await stopAllConsoles();
  await stopAllDaemons();
  stopPlacedDaemons();
  rmSync(dir, { recursive: true, force: true });
});

/** One GET over a Unix socket, with the Host a proxy would send. */
function overSocket(path: string, url: string, headers: Record<string, string>): Promise<{ status: number; headers: Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: path, path: url, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers }));
    });
    req.on('error', reject);
    req.end();
  });
}

describe('procctl ui --listen PATH (behind a reverse proxy)', () => {
  it("listens on a 0600 socket and answers to the proxy's URL only", async () => {
    const d = await startDaemon();
    const path = join(dir, 'console.sock');
    const ui = await startConsole(d, ['--listen', path, '--url', 'https://console.example.org']);
    expect(ui.url).toMatch(/^https:\/\/console\.example\.org\/\?token=/);
    expect(statSync(path).mode & 0o777).toBe(0o600);
    const token = new URL(ui.url).search;
    expect((await overSocket(path, `/${token}`, { host: 'localhost' })).status).toBe(421);
    const traded = await overSocket(path, `/${token}`, { host: 'console.example.org' });
    expect(traded.status).toBe(303);
    const cookie = String((traded.headers['set-cookie'] as string[])[0]).split(';')[0];
    expect(cookie).toMatch(/^procctl_console_sock=/);
    expect((await overSocket(path, '/api/session', { host: 'console.example.org', cookie })).status).toBe(200);
    await ui.stop();
    await d.stop();
  });
});

describe.skipIf(!CHROMIUM)('when the daemon goes away', () => {
  let browser: Browser | undefined;
  afterAll(async () => browser?.close());

  it('the page says so, and once a daemon is back (with a new approver credential) it shows that one', async () => {
    const socket = join(dir, 'run', 'procctl.sock');
    const state = join(dir, 'state');
    const first = await daemonAt(socket, dir);
    const ui = await startConsole({ socket, env: { ...process.env, PROCCTL_STATE_DIR: state } });
    browser = await launchBrowser();
    const page = await (await browser.newContext()).newPage();
    await page.goto(ui.url);
    await page.locator('dl.daemon').waitFor({ timeout: 20_000 });
    first.kill('SIGTERM');
    await page.getByText('The daemon cannot be reached').waitFor({ timeout: 20_000 });
    await daemonAt(socket, dir);
    const c = await TestClient.connect(socket);
    const r = await c.exec({ command: 'echo after-the-restart', scope: 'back' });
    await page.locator(`tr[data-session="${r.sessionId}"]`).waitFor({ timeout: 20_000 });
    c.close();
    await ui.stop();
  });
});
