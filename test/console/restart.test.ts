import { readFileSync } from 'node:fs';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { CHROMIUM, launchBrowser, startConsole, stopAllConsoles, type TestConsole } from './console.js';

/**
 * The console through a planned restart (SPEC §19): its link reconnects, the sessions stay on
 * screen, and the header says the daemon restarted, when, and how long it took to serve again.
 */

let d: TestDaemon;
let ui: TestConsole;
let browser: Browser;
const pids = new Set<number>();

beforeAll(async () => {
  if (!CHROMIUM) return;
  d = await startDaemon();
  ui = await startConsole(d);
  browser = await launchBrowser();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await stopAllConsoles();
  await stopAllDaemons();
  killLeftovers(pids);
});

describe.skipIf(!CHROMIUM)('the console across a planned restart', () => {
  it('keeps the sessions on screen, then shows the restart in its header; new sessions show after it', async () => {
    const c = await TestClient.connect(d.socket);
    const job = await c.call('exec', { command: 'sleep 60', background: true, scope: 'agent' });
    pids.add(job.pid);
    const page = await (await browser.newContext()).newPage();
    await page.goto(ui.url);
    const row = page.locator(`tr[data-session="${job.sessionId}"]`);
    await row.waitFor({ timeout: 20_000 });
    expect(await page.locator('.restarted').count()).toBe(0);
    const asked = await c.request('daemon.restart', { scope: '*', approverToken: readFileSync(`${d.socket}.approver`, 'utf8').trim() });
    c.close();
    expect(asked.result?.sessions).toBe(1);
    // Through it, the row stays.
    const header = page.locator('.restarted dd');
    await header.waitFor({ timeout: 30_000 });
    expect(await row.count()).toBe(1);
    expect(await header.innerText()).toMatch(/serving again after \d/);
    // The live feed is back: a session started now shows.
    const c2 = await TestClient.connect(d.socket);
    const fresh = await c2.call('exec', { command: 'echo after-restart', scope: 'agent' });
    c2.close();
    await page.locator(`tr[data-session="${fresh.sessionId}"]`).waitFor({ timeout: 20_000 });
    await waitFor(async () => (await row.count()) === 1, { what: 'the adopted session still listed' });
    await page.close();
  }, 120_000);
});
