import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { CHROMIUM, launchBrowser, startConsole, stopAllConsoles, type TestConsole } from './console.js';

/**
 * What a person reads in the console's tables, in a real browser at a laptop's width and a narrow
 * window's: ids, statuses, scopes and hosts on one line each whatever the commands beside them,
 * statuses in words, each part of a command judged once, counts with their plural.
 * PROCCTL_SCREENSHOTS=DIR keeps a picture of each width there, to look at.
 */

const LONG_SCOPE = 'nightly-integration-builds';
const SHOTS = process.env.PROCCTL_SCREENSHOTS;
const dir = mkdtempSync(join(tmpdir(), 'procctl-tables-'));
let d: TestDaemon;
let c: TestClient;
let ui: TestConsole;
let browser: Browser;
let person: BrowserContext;
const ids: Record<string, string> = {};

beforeAll(async () => {
  if (!CHROMIUM) return;
  d = await startDaemon({ config: { approvals: { rules: [{ match: 'rm -rf', action: 'ask', reason: 'recursive delete' }] } } });
  c = await d.client();
  const work = join(dir, 'a-workspace-with-a-rather-long-directory-name', 'and-a-subdirectory-of-it');
  mkdirSync(work, { recursive: true });
  // A long command of long words, the kind that pushed the other columns into breaking.
  const long = `node --max-old-space-size=4096 ./node_modules/.bin/vitest run --reporter=verbose --coverage.enabled=true test/integration/approval_required_and_waiting_input_sessions.test.ts; echo finished-${'x'.repeat(60)}`;
  ids.asked = (await c.exec({ command: 'rm -rf build', workdir: work, scope: 'default' })).sessionId;
  ids.done = (await c.exec({ command: long, workdir: work, scope: LONG_SCOPE })).sessionId;
  ids.exit2 = (await c.exec({ command: 'exit 2', workdir: work, scope: 'default' })).sessionId;
  ids.input = (await c.exec({ command: 'printf "Proceed? [y/N] "; read a', background: true, scope: LONG_SCOPE })).sessionId;
  const killed = await c.exec({ command: 'sleep 600', background: true, scope: 'default' });
  await c.process({ action: 'kill', sessionId: killed.sessionId, scope: 'default' });
  ids.failed = killed.sessionId;
  await waitFor(async () => (await c.process({ action: 'list', scope: '*', ...asPerson(d) })).sessions.find((s: any) => s.sessionId === ids.failed)?.status === 'failed', { what: 'the killed session to end' });
  await waitFor(async () => (await c.process({ action: 'list', scope: '*', ...asPerson(d) })).sessions.find((s: any) => s.sessionId === ids.input)?.status === 'waiting_input', { what: 'the prompt to wait for input' });
  ui = await startConsole(d);
  browser = await launchBrowser();
  person = await browser.newContext();
  const first = await person.newPage();
  await first.goto(ui.url);
  await first.close();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  if (c && ids.input) await c.process({ action: 'kill', sessionId: ids.input, scope: LONG_SCOPE }).catch(() => undefined);
  c?.close();
  await stopAllConsoles();
  await stopAllDaemons();
  rmSync(dir, { recursive: true, force: true });
});

/**
 * The cells matching `selector` whose text takes more than one line, or does not fit its cell:
 * each as "class: text (lines, widths)". A text node's lines are its range's client rects.
 */
function wrapped(page: Page, selector: string): Promise<string[]> {
  return page.evaluate((sel) => {
    const out: string[] = [];
    for (const cell of document.querySelectorAll<HTMLElement>(sel)) {
      if (!cell.textContent || cell.offsetParent === null) continue;
      // Each text node's line boxes: one rect per line it takes.
      const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      let lines = 0;
      for (let t = walk.nextNode(); t; t = walk.nextNode()) {
        const range = document.createRange();
        range.selectNodeContents(t);
        lines = Math.max(lines, [...range.getClientRects()].filter((r) => r.width > 0).length);
      }
      if (lines > 1 || cell.scrollWidth > cell.clientWidth + 1) out.push(`${cell.className}: ${cell.textContent} (${lines} lines, ${cell.scrollWidth} in ${cell.clientWidth})`);
    }
    return out;
  }, selector);
}

async function at(width: number, route: string): Promise<Page> {
  const page = await person.newPage();
  await page.setViewportSize({ width, height: 900 });
  await page.goto(`${ui.origin}/${route}`);
  return page;
}

const row = (page: Page, id: string) => page.locator(`table.sessions tr[data-session="${id}"]`);

describe.skipIf(!CHROMIUM)('the tables as a person reads them', () => {
  it.each([1280, 800])('at %i px no id, status or scope cell wraps, in Sessions and History', async (width) => {
    const page = await at(width, '#/');
    for (const id of Object.values(ids)) await row(page, id).waitFor({ timeout: 20_000 });
    await page.locator(`.approval[data-session="${ids.asked}"] .parts tbody tr`).first().waitFor({ timeout: 20_000 });
    // Statuses in words, ends as `procctl ps` says them.
    const status = async (id: string) => (await row(page, id).locator('td.status').innerText()).trim();
    expect(await status(ids.asked)).toBe('waiting for approval');
    expect(await status(ids.input)).toBe('waiting for input');
    expect(await status(ids.done)).toBe('completed');
    expect(await status(ids.exit2)).toBe('completed (2)');
    expect(await status(ids.failed)).toMatch(/^failed \(SIG(TERM|KILL), user\)$/);
    expect(await row(page, ids.done).locator('td.scope').innerText()).toBe(LONG_SCOPE);
    expect(await wrapped(page, 'table.sessions td.id, table.sessions td.status, table.sessions td.scope, table.sessions td.runtime')).toEqual([]);
    // The command gives way: it wraps, inside a word where it must.
    const cmd = await row(page, ids.done).locator('td.cmd').boundingBox();
    expect(cmd!.height).toBeGreaterThan(40);
    expect(await page.evaluate(() => innerWidth)).toBe(width);
    // ... within the window, however many columns there are beside it.
    for (const id of Object.values(ids)) {
      const box = (await row(page, id).locator('td.cmd').boundingBox())!;
      expect(box.x + box.width, `the command of ${id}`).toBeLessThanOrEqual(width);
    }
    if (SHOTS) await page.screenshot({ path: join(SHOTS, `console-${width}.png`), fullPage: true });
    await page.close();

    const history = await at(width, '#/history');
    for (const id of Object.values(ids)) await history.locator(`table.history-list tr[data-session="${id}"]`).waitFor({ timeout: 20_000 });
    const ended = async (id: string) => (await history.locator(`table.history-list tr[data-session="${id}"] td.status`).innerText()).trim();
    expect(await ended(ids.asked)).toBe('waiting for approval');
    expect(await ended(ids.exit2)).toBe('completed (2)');
    expect(await wrapped(history, 'table.history-list td.id, table.history-list td.status, table.history-list td.scope, table.history-list td.when')).toEqual([]);
    if (SHOTS) await history.screenshot({ path: join(SHOTS, `history-${width}.png`), fullPage: true });
    await history.close();
  });

  it('the approval card of a one-part command judges that part once', async () => {
    const page = await at(1280, '#/');
    const rows = page.locator(`.approval[data-session="${ids.asked}"] .parts tbody tr`);
    await rows.first().waitFor({ timeout: 20_000 });
    expect(await rows.allInnerTexts()).toEqual([expect.stringMatching(/^rm -rf build\s+ask\s+rule 0\s+recursive delete$/)]);
    await page.close();
  });
});
