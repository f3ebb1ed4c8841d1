import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from '../integration/sandbox-support.js';
import { CHROMIUM, startConsole, stopAllConsoles, type TestConsole, launchBrowser } from './console.js';

/**
 * The console with a real sandbox: a confined job whose network names 127.0.0.1 reaches the
 * console and still cannot act through it, and a review session's diff is shown and applied
 * from the page.
 */

const fs = scratchRoot('procctl-console-sandbox-');
const ws = fs.dir('ws');
const ids = new Set<string>();
let d: TestDaemon;
let c: TestClient;
let ui: TestConsole;
let review: { review: boolean; reason?: string } | undefined;

beforeAll(async () => {
  if (SKIP_SANDBOX) return;
  d = await startDaemon({ config: { sandbox: { mode: 'workspace-write', workspaces: [ws], network: { allow: ['127.0.0.1'], deny: [] } } } });
  c = await d.client();
  ui = await startConsole(d);
  review = (await c.call('daemon.status', {})).changes;
  if (!review?.review) process.stderr.write(`skipping the console's review test: ${review?.reason ?? 'the daemon reports no review support'}\n`);
});

afterAll(async () => {
  c?.close();
  await stopAllConsoles();
  await stopAllDaemons();
  killMarked(ids);
  fs.cleanup();
});

async function record(id: string): Promise<any> {
  const r = await c.process({ action: 'list', scope: '*', ...asPerson(d) });
  return r.sessions.find((s: any) => s.sessionId === id);
}

describe.skipIf(SKIP_SANDBOX)('a sandboxed job whose network allows 127.0.0.1', () => {
  it('reaches the console through its proxy and is refused: no cookie, no CSRF token, no action', async () => {
    const target = await c.exec({ command: 'sleep 600', background: true, scope: 'agent' });
    ids.add(target.sessionId);
    // Through the daemon's proxy (the only way out), with the console's own Origin: all the job can know.
    const curl = `curl -sS -m 20 --noproxy "" -o /dev/null -w '%{http_code}\\n'`;
    const command = [
      `${curl} -X POST -H 'content-type: application/json' -H 'Origin: ${ui.origin}' --data '{"action":"kill","sessionId":"${target.sessionId}"}' ${ui.origin}/api/act`,
      `${curl} ${ui.origin}/api/events`,
      `${curl} ${ui.origin}/`,
    ].join('; ');
    const r = await c.exec({ command, workdir: ws, scope: 'agent', yieldMs: 60_000, stdin: 'null' });
    ids.add(r.sessionId);
    expect(r.status, r.text).toBe('completed');
    // 401s, not the proxy's 403: it reached the console, which refused it.
    expect(r.output.trim().split('\n')).toEqual(['401', '401', '401']);
    expect(r.network).toBeUndefined();
    expect((await record(target.sessionId)).status).toBe('running');
    await c.process({ action: 'kill', sessionId: target.sessionId, scope: 'agent' });
  });
});

describe.skipIf(SKIP_SANDBOX || !CHROMIUM)("a review session's changes in the page", () => {
  let browser: Browser | undefined;
  afterAll(async () => browser?.close());

  it('shows the files and the diff; Apply writes them into the workspace', async (ctx) => {
    if (!review?.review) ctx.skip();
    const dir = join(ws, 'held');
    mkdirSync(dir);
    writeFileSync(join(dir, 'keep.txt'), 'original\n');
    const r = await c.exec({ command: 'echo changed > keep.txt && echo fresh > added.txt', workdir: dir, changes: 'review', scope: 'agent', yieldMs: 60_000 });
    ids.add(r.sessionId);
    expect(r.status, r.text).toBe('completed');
    expect(r.changes).toMatchObject({ pending: true });
    browser = await launchBrowser();
    const page = await (await browser.newContext()).newPage();
    await page.goto(ui.url);
    // The table counts them in words: two files, pending.
    const held = page.locator(`table.sessions tr[data-session="${r.sessionId}"] td.changes`);
    await held.waitFor({ timeout: 20_000 });
    expect(await held.innerText()).toBe('2 files pending');
    await page.goto(`${ui.origin}/#/s/${r.sessionId}`);
    const diff = page.locator('pre.diff');
    await diff.waitFor({ timeout: 20_000 });
    expect(await diff.locator('.d-del').allInnerTexts()).toContain('-original\n');
    expect(await diff.locator('.d-add').allInnerTexts()).toEqual(expect.arrayContaining(['+changed\n', '+fresh\n']));
    expect(await page.locator('.changes .files').innerText()).toMatch(/modified\s+held\/keep\.txt[\s\S]*added\s+held\/added\.txt|added\s+held\/added\.txt[\s\S]*modified\s+held\/keep\.txt/);
    // Untouched until the person applies it.
    expect(readFileSync(join(dir, 'keep.txt'), 'utf8')).toBe('original\n');
    await page.getByRole('button', { name: 'Apply' }).click();
    // The apply writes one file after another: the workspace is read once the page says it is done.
    await page.locator('#changes-h', { hasText: 'applied' }).waitFor({ timeout: 20_000 });
    expect(existsSync(join(dir, 'added.txt'))).toBe(true);
    expect(readFileSync(join(dir, 'keep.txt'), 'utf8')).toBe('changed\n');
  });
});
