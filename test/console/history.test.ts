import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { CHROMIUM, startConsole, stopAllConsoles, type TestConsole, launchBrowser } from './console.js';

/** The History page: the daemon's audit trail through `history`, filtered, paged, one session's story. */

let d: TestDaemon;
let c: TestClient;
let ui: TestConsole;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!CHROMIUM) return;
  d = await startDaemon({
    config: {
      approvals: {
        rules: [
          { command: ['rm'], action: 'deny', reason: 'nothing is removed here' },
          { command: ['touch'], action: 'ask', reason: 'creates files' },
        ],
      },
    },
  });
  c = await d.client();
  ui = await startConsole(d);
  browser = await launchBrowser();
  page = await (await browser.newContext()).newPage();
  await page.goto(ui.url);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  c?.close();
  await stopAllConsoles();
  await stopAllDaemons();
});

describe.skipIf(!CHROMIUM)('the History page', () => {
  it('lists what ran and what a rule denied, with who asked and who allowed, filtered; a click tells one whole', async () => {
    const ran = await c.exec({ command: 'echo hist-ran', scope: 'hist' });
    const denied = await c.exec({ command: 'rm -f /tmp/hist-denied', scope: 'hist' });
    expect(denied.status).toBe('denied');
    const asked = await c.exec({ command: 'touch /tmp/procctl-hist-approved', scope: 'other' });
    await c.process({ action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, scope: 'other', ...asPerson(d) });
    await waitFor(async () => (await c.process({ action: 'poll', sessionId: asked.sessionId, scope: 'other' })).status === 'completed', { what: 'the approved touch to end' });

    await page.getByRole('link', { name: 'History' }).click();
    await page.getByLabel('Text').fill('hist');
    await page.getByRole('button', { name: 'Show' }).click();
    const row = (id: string) => page.locator(`table.history-list tr[data-session="${id}"]`);
    await row(ran.sessionId).waitFor({ timeout: 30_000 });
    await row(denied.sessionId).waitFor({ timeout: 30_000 });
    await row(asked.sessionId).waitFor({ timeout: 30_000 });
    expect(await row(denied.sessionId).innerText()).toMatch(/denied.*deny \(rule 0\): nothing is removed here/s);
    expect(await row(asked.sessionId).locator('.allowed').innerText()).toMatch(/approved by /);
    expect(await row(ran.sessionId).locator('.asked').innerText()).toMatch(/uid \d+ pid \d+/);

    // Narrowed by status, then by scope.
    await page.locator('.history .filters').getByLabel('Status').selectOption('denied');
    await page.getByRole('button', { name: 'Show' }).click();
    await row(ran.sessionId).waitFor({ state: 'detached', timeout: 20_000 });
    expect(await row(denied.sessionId).isVisible()).toBe(true);
    await page.locator('.history .filters').getByLabel('Status').selectOption('');
    await page.getByLabel('Scope').fill('other');
    await page.getByRole('button', { name: 'Show' }).click();
    await row(denied.sessionId).waitFor({ state: 'detached', timeout: 20_000 });
    expect(await row(asked.sessionId).isVisible()).toBe(true);

    // One session's story, in order.
    await row(asked.sessionId).getByRole('link', { name: asked.sessionId }).click();
    const story = page.locator('table.records');
    await story.waitFor({ timeout: 20_000 });
    const text = await story.innerText();
    expect(text).toMatch(/asked\s+touch \/tmp\/procctl-hist-approved/);
    expect(text).toMatch(/decided\s+ask: touch .*rule 1: creates files/);
    expect(text).toMatch(/answered\s+approved \(approval\) by /);
    expect(text).toMatch(/ended\s+completed exit 0/);
    // Back, the filters are as they were.
    await page.getByRole('link', { name: '← History' }).click();
    expect(await page.getByLabel('Scope').inputValue()).toBe('other');
  });

  it('pages through many sessions, and shows a job\'s markup in a command as text', async () => {
    for (let i = 0; i < 55; i++) await c.exec({ command: `echo page-${i} '<img src=x onerror="window.__pwned=1">'`, scope: 'paged' });
    await page.goto(`${ui.origin}/#/history`);
    await page.getByLabel('Text').fill('');
    await page.getByLabel('Scope').fill('paged');
    await page.getByRole('button', { name: 'Show' }).click();
    await page.getByText('1–50 of 55').waitFor({ timeout: 20_000 });
    await page.getByRole('button', { name: 'Older' }).click();
    await page.getByText('51–55 of 55').waitFor({ timeout: 20_000 });
    expect(await page.locator('table.history-list').innerText()).toContain('echo page-0 \'<img src=x onerror="window.__pwned=1">\'');
    expect(await page.locator('main img').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    await page.getByRole('button', { name: 'Newer' }).click();
    await page.getByText('1–50 of 55').waitFor({ timeout: 20_000 });
  });
});
