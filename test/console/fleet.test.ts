import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';
import { findSshd, startSshd, type TestSshd } from '../remote/sshd.js';
import { CHROMIUM, daemonAt, startConsole, stopAllConsoles, stopPlacedDaemons, type TestConsole, launchBrowser } from './console.js';

/**
 * The fleet view (`procctl ui --host local --host far=ssh://…`): two daemons in one page, one of
 * them behind a real sshd on 127.0.0.1, each row naming its host and each action reaching its host.
 */

const { sshd, missing } = findSshd();
if (missing) console.warn(`skipping the console's fleet test: ${missing}`);
const can = Boolean(sshd && CHROMIUM);

const dir = mkdtempSync(join(tmpdir(), 'procctl-fleet-'));
const localSocket = join(dir, 'run', 'procctl.sock');
let far: TestDaemon;
let farClient: TestClient;
let s: TestSshd;
let ui: TestConsole;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  if (!can) return;
  far = await startDaemon({ config: { approvals: { rules: [{ command: ['touch'], action: 'ask', reason: 'creates files' }] } }, env: { PROCCTL_KILL_GRACE_MS: '1000' } });
  farClient = await far.client();
  s = await startSshd(sshd!, far.socket);
  await daemonAt(localSocket, dir);
  const approver = readFileSync(`${far.socket}.approver`, 'utf8').trim();
  // The far host's credential under its own name; the local one is read beside its socket.
  ui = await startConsole({ socket: localSocket, env: process.env }, ['--host', 'local', '--host', `far=${s.url}`], {
    PROCCTL_SSH_COMMAND: s.sshCommand('good'),
    PROCCTL_APPROVER_TOKEN_FAR: approver,
  });
  browser = await launchBrowser();
  page = await (await browser.newContext()).newPage();
  await page.goto(ui.url);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  farClient?.close();
  await stopAllConsoles();
  await s?.stop();
  stopPlacedDaemons();
  await stopAllDaemons();
  rmSync(dir, { recursive: true, force: true });
});

const farSession = async (id: string) => (await farClient.process({ action: 'list', scope: '*', ...asPerson(far) })).sessions.find((x: any) => x.sessionId === id);

describe.skipIf(!can)('procctl ui --host local --host far=ssh://…', () => {
  it('shows both daemons in one table, each row naming its host, with a host filter', async () => {
    const local = await TestClient.connect(localSocket);
    const here = await local.exec({ command: 'echo on-the-local-host', scope: 'fleet' });
    local.close();
    const there = await farClient.exec({ command: 'echo on-the-far-host', scope: 'fleet' });
    const hereRow = page.locator(`tr[data-session="${here.sessionId}"][data-host="local"]`);
    const thereRow = page.locator(`tr[data-session="${there.sessionId}"][data-host="far"]`);
    await hereRow.waitFor({ timeout: 30_000 });
    await thereRow.waitFor({ timeout: 30_000 });
    expect(await hereRow.locator('td.host').innerText()).toBe('local');
    expect(await thereRow.locator('td.host').innerText()).toBe('far');
    for (const h of ['local', 'far']) await page.locator(`li.host[data-host="${h}"] .state`, { hasText: /^connected/ }).waitFor({ timeout: 30_000 });
    await page.locator('.filters').getByLabel('Host').selectOption('far');
    await hereRow.waitFor({ state: 'detached', timeout: 20_000 });
    expect(await thereRow.isVisible()).toBe(true);
    await page.locator('.filters').getByLabel('Host').selectOption('');
    await hereRow.waitFor({ timeout: 20_000 });
  });

  it('an approval of the far host names it, and Approve reaches that daemon', async () => {
    const mark = join(dir, 'approved-far');
    const r = await farClient.exec({ command: `touch ${mark}`, scope: 'fleet' });
    expect(r.status).toBe('approval_required');
    const card = page.locator(`.approval[data-session="${r.sessionId}"][data-host="far"]`);
    await card.waitFor({ timeout: 30_000 });
    expect(await card.locator('.on-host').innerText()).toBe('far');
    await card.getByRole('button', { name: 'Approve', exact: true }).click();
    await waitFor(() => existsSync(mark), { what: 'the far command, approved, to run' });
    const story = await farClient.call('history', { scope: '*', sessionId: r.sessionId, ...asPerson(far) });
    expect(story.sessions[0].answers).toEqual([expect.objectContaining({ answer: 'approve', by: 'console' })]);
  });

  it("Kill on a far session's page ends it there", async () => {
    const r = await farClient.exec({ command: 'sleep 600', background: true, scope: 'fleet' });
    await page.goto(`${ui.origin}/#/s/far/${r.sessionId}`);
    await page.getByRole('button', { name: 'Kill' }).click({ timeout: 30_000 });
    await waitFor(async () => (await farSession(r.sessionId))?.status === 'failed', { what: 'the far session to be killed' });
    await page.goto(`${ui.origin}/#/`);
  });

  it("History asks the host chosen: the far host's trail has its sessions, the local one's not", async () => {
    const r = await farClient.exec({ command: 'echo told-by-the-far-trail', scope: 'fleet' });
    await page.goto(`${ui.origin}/#/history`);
    const filters = page.locator('.history .filters');
    await filters.getByLabel('Text').fill('told-by-the-far-trail');
    await filters.getByRole('button', { name: 'Show' }).click();
    await page.getByText('No sessions on record match.').waitFor({ timeout: 20_000 });
    await filters.getByLabel('Host').selectOption('far');
    await filters.getByRole('button', { name: 'Show' }).click();
    await page.locator(`table.history-list tr[data-session="${r.sessionId}"]`).waitFor({ timeout: 30_000 });
    await page.getByText('1–1 of 1 on far').waitFor({ timeout: 20_000 });
    await page.goto(`${ui.origin}/#/`);
  });

  it('a page cannot name a host the console does not show', async () => {
    const answer = await page.evaluate(async () => (await fetch('/api/read?action=log&sessionId=x&host=elsewhere')).json());
    expect(answer.error).toMatch(/no host "elsewhere".*local, far/);
    // With two hosts, a read or an action must say which.
    const unnamed = await page.evaluate(async () => (await fetch('/api/read?action=log&sessionId=x')).json());
    expect(unnamed.error).toMatch(/name the host: one of local, far/);
  });

  it('a host that drops is shown disconnected while the other goes on; back, it is shown again', async () => {
    const state = page.locator('li.host[data-host="local"] .state');
    const local = await TestClient.connect(localSocket);
    const { pid } = await local.call('daemon.status', {});
    local.close();
    process.kill(pid, 'SIGTERM');
    await state.filter({ hasText: /^disconnected/ }).waitFor({ timeout: 30_000 });
    const r = await farClient.exec({ command: 'echo while-local-is-down', scope: 'fleet' });
    await page.locator(`tr[data-session="${r.sessionId}"][data-host="far"]`).waitFor({ timeout: 30_000 });
    expect(await page.locator('li.host[data-host="far"] .state').innerText()).toMatch(/^connected/);
    await daemonAt(localSocket, dir);
    await state.filter({ hasText: /^connected/ }).waitFor({ timeout: 30_000 });
    const back = await TestClient.connect(localSocket);
    const again = await back.exec({ command: 'echo local-is-back', scope: 'fleet' });
    back.close();
    await page.locator(`tr[data-session="${again.sessionId}"][data-host="local"]`).waitFor({ timeout: 30_000 });
  });
});
