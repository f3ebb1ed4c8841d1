import { type Browser } from 'playwright-core';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from '../helpers/daemon.js';
import { CHROMIUM, startConsole, stopAllConsoles, launchBrowser } from './console.js';

let browser: Browser | undefined;
afterAll(async () => {
  await browser?.close();
  await stopAllConsoles();
  await stopAllDaemons();
});

describe.skipIf(!CHROMIUM)('many sessions', () => {
  it('draws the newest 200 rows at first, the rest on asking, and filters by text over all of them', async () => {
    const d = await startDaemon({ env: { PROCCTL_INTERRUPT: 'false' } });
    const c = await d.client();
    await Promise.all(Array.from({ length: 250 }, (_, i) => c.exec({ command: `echo row-${i}`, scope: `s${i % 5}`, stdin: 'null' })));
    const ui = await startConsole(d);
    browser = await launchBrowser();
    const page = await (await browser.newContext()).newPage();
    await page.goto(ui.url);
    const rows = page.locator('table.sessions tbody tr');
    await page.getByRole('button', { name: 'Show 50 more of 50' }).waitFor({ timeout: 20_000 });
    expect(await rows.count()).toBe(200);
    await page.getByRole('button', { name: 'Show 50 more of 50' }).click();
    expect(await rows.count()).toBe(250);
    await page.getByLabel('Search').fill('row-249');
    expect(await rows.count()).toBe(1);
    await page.getByLabel('Search').fill('');
    await page.getByLabel('Scope').selectOption('s3');
    expect(await rows.count()).toBe(50);
    // A running session's runtime ticks in its own cell, and stays once it has ended.
    await page.getByLabel('Scope').selectOption('');
    const job = await c.exec({ command: 'sleep 4', scope: 'ticking', background: true });
    const row = page.locator(`table.sessions tbody tr[data-session="${job.sessionId}"]`);
    const cell = row.locator('td.runtime');
    await cell.waitFor({ timeout: 10_000 });
    const first = await cell.textContent();
    expect(first).toMatch(/^\d+s$/);
    await expect.poll(() => cell.textContent(), { timeout: 10_000 }).not.toBe(first);
    await expect.poll(() => row.locator('.status').textContent(), { timeout: 10_000 }).toBe('completed');
    const ended = await cell.textContent();
    await new Promise((r) => setTimeout(r, 1500));
    expect(await cell.textContent()).toBe(ended);
    c.close();
  });
});
