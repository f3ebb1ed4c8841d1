import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { CHROMIUM, startConsole, stopAllConsoles, type TestConsole, launchBrowser } from './console.js';

/**
 * The console in a real browser (Debian's chromium through playwright-core), against a real
 * daemon: what a person does with it, and what a hostile page or name cannot do.
 */

const REBOUND = 'rebound.test';
let d: TestDaemon;
let c: TestClient;
let ui: TestConsole;
let browser: Browser;
let person: BrowserContext;
const dir = mkdtempSync(join(tmpdir(), 'procctl-console-'));

beforeAll(async () => {
  if (!CHROMIUM) return;
  d = await startDaemon({
    config: { approvals: { rules: [{ command: ['touch'], action: 'ask', reason: 'creates files' }] } },
    env: { PROCCTL_KILL_GRACE_MS: '1000' },
  });
  c = await d.client();
  ui = await startConsole(d);
  // A name an attacker's DNS points at loopback (DNS rebinding), resolved by the browser itself.
  browser = await launchBrowser([`--host-resolver-rules=MAP ${REBOUND} 127.0.0.1`]);
  person = await browser.newContext();
  const first = await person.newPage();
  await first.goto(ui.url);
  await first.close();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  c?.close();
  await stopAllConsoles();
  await stopAllDaemons();
  rmSync(dir, { recursive: true, force: true });
});

/** A page of the person's browser (it has the console's cookie), at a route of the console. */
async function open(route = '#/'): Promise<Page> {
  const page = await person.newPage();
  await page.goto(`${ui.origin}/${route}`);
  return page;
}

async function session(id: string): Promise<any> {
  const r = await c.process({ action: 'list', scope: '*', ...asPerson(d) });
  return r.sessions.find((s: any) => s.sessionId === id);
}

const sessionRoute = (id: string) => `#/s/${id}`;

describe.skipIf(!CHROMIUM)('the console in a browser', () => {
  it('shows a pending approval, with its parts and rule, and Approve runs the command', async () => {
    const page = await open();
    const mark = join(dir, 'approved');
    const r = await c.exec({ command: `touch ${mark}`, scope: 'agent' });
    expect(r.status).toBe('approval_required');
    const card = page.locator(`.approval[data-session="${r.sessionId}"]`);
    const asked = Date.now();
    await card.waitFor({ timeout: 20_000 });
    const shownMs = Date.now() - asked;
    expect(await card.locator('.parts').innerText()).toMatch(/touch .*\bask\b.*rule 0.*creates files/s);
    expect(existsSync(mark)).toBe(false);
    await card.getByRole('button', { name: 'Approve', exact: true }).click();
    await waitFor(() => existsSync(mark), { what: 'the approved command to run' });
    await waitFor(async () => (await session(r.sessionId))?.status === 'completed', { what: 'the session to complete' });
    await card.waitFor({ state: 'detached', timeout: 20_000 });
    await page.close();
    // The audit trail says the person answered through the console (SPEC §18).
    const story = await c.call('history', { scope: '*', sessionId: r.sessionId, ...asPerson(d) });
    expect(story.sessions[0].answers).toEqual([expect.objectContaining({ kind: 'approval', answer: 'approve', by: 'console' })]);
    // On a loaded machine a second is not promised; far more would mean it is not pushed.
    expect(shownMs).toBeLessThan(10_000);
  });

  it('several tabs at once each get the pushes; an answer in one clears it in the other', async () => {
    const [one, two] = [await open(), await open()];
    const r = await c.exec({ command: `touch ${join(dir, 'two-tabs')}`, scope: 'tabs' });
    const cards = [one, two].map((p) => p.locator(`.approval[data-session="${r.sessionId}"]`));
    for (const card of cards) await card.waitFor({ timeout: 20_000 });
    await cards[0].getByRole('button', { name: 'Deny', exact: true }).click();
    await cards[1].waitFor({ state: 'detached', timeout: 20_000 });
    await one.close();
    // A tab closed, the other goes on being pushed to.
    const r2 = await c.exec({ command: 'echo still-pushed', scope: 'tabs' });
    await two.locator(`tr[data-session="${r2.sessionId}"]`).waitFor({ timeout: 20_000 });
    await two.close();
    // Every tab closed (the console unsubscribes), a new one is served afresh.
    const three = await open();
    const r3 = await c.exec({ command: 'echo after-all-closed', scope: 'tabs' });
    await three.locator(`tr[data-session="${r3.sessionId}"]`).waitFor({ timeout: 20_000 });
    await three.close();
  });

  it('Deny ends it denied; Approve and remember keeps an allow rule for the scope', async () => {
    const page = await open();
    const denied = join(dir, 'denied');
    const r = await c.exec({ command: `touch ${denied}`, scope: 'agent' });
    const card = page.locator(`.approval[data-session="${r.sessionId}"]`);
    await card.getByRole('button', { name: 'Deny', exact: true }).click();
    await waitFor(async () => (await session(r.sessionId))?.status === 'denied', { what: 'the session to be denied' });
    expect(existsSync(denied)).toBe(false);

    const kept = join(dir, 'kept');
    const r2 = await c.exec({ command: `touch ${kept}`, scope: 'remember' });
    await page.locator(`.approval[data-session="${r2.sessionId}"]`).getByRole('button', { name: 'Approve and remember this command' }).click();
    await waitFor(() => existsSync(kept), { what: 'the remembered command to run' });
    // The same command in that scope now runs without asking.
    const again = await c.exec({ command: `touch ${kept}`, scope: 'remember' });
    expect(again.status).toBe('completed');
    await page.close();
  });

  it("shows a running job's output live, stderr marked, and a job's markup as text", async () => {
    const r = await c.exec({
      command: `echo '<img src=x onerror="window.__pwned=1">'; for i in $(seq 1 400); do echo line-$i; echo err-$i >&2; sleep 0.05; done`,
      background: true,
      scope: 'agent',
    });
    const page = await open(sessionRoute(r.sessionId));
    const out = page.locator('pre.out.live');
    await waitFor(async () => (await out.innerText().catch(() => '')).includes('line-'), { what: 'output in the page' });
    const seen = (await out.innerText()).match(/line-(\d+)/g)!.length;
    // It keeps coming without a reload.
    await waitFor(async () => ((await out.innerText()).match(/line-(\d+)/g)?.length ?? 0) > seen + 5, { what: 'more output, pushed' });
    expect(await out.locator('.stderr').first().innerText()).toMatch(/err-\d+/);
    expect(await out.innerText()).toContain('<img src=x onerror="window.__pwned=1">');
    expect(await page.locator('main img').count()).toBe(0);
    expect(await page.evaluate(() => (window as unknown as { __pwned?: number }).__pwned)).toBeUndefined();
    await c.process({ action: 'kill', sessionId: r.sessionId, scope: 'agent' });
    await page.close();
  });

  it('marks stderr in the output paged back through the log, not only in what arrives live', async () => {
    // 600 lines: the session view reads the last 200, "Show earlier output" the ones before.
    const r = await c.exec({ command: 'for i in $(seq 1 150); do echo out-$i; echo err-$i >&2; echo out-$i-b; echo err-$i-b >&2; sleep 0.002; done', scope: 'agent' });
    expect(r.status).toBe('completed');
    const page = await open(sessionRoute(r.sessionId));
    /** Each line of a pre, and whether it was drawn as stderr. */
    const linesOf = (selector: string) =>
      page.locator(selector).evaluate((pre) =>
        [...pre.querySelectorAll('span')].flatMap((span) =>
          (span.textContent ?? '').split('\n').filter(Boolean).map((line) => ({ line, stderr: span.classList.contains('stderr') })),
        ),
      );
    await waitFor(async () => (await linesOf('pre.out.live').catch(() => [])).length >= 200, { what: 'the last page of output' });
    const last = await linesOf('pre.out.live');
    expect(last.some((l) => l.stderr)).toBe(true);
    for (const l of last) expect(l.stderr, l.line).toBe(l.line.startsWith('err-'));
    await page.getByRole('button', { name: /Show earlier output/ }).click();
    await page.locator('pre.earlier-out').waitFor({ timeout: 20_000 });
    const earlier = await linesOf('pre.earlier-out');
    expect(earlier.length).toBe(200);
    expect(earlier.some((l) => l.stderr)).toBe(true);
    for (const l of earlier) expect(l.stderr, l.line).toBe(l.line.startsWith('err-'));
    await page.close();
  });

  it('Pause and Continue freeze and thaw it where it has a cgroup; Kill ends it', async () => {
    const r = await c.exec({ command: 'sleep 600', background: true, scope: 'agent' });
    const page = await open(sessionRoute(r.sessionId));
    // Where the daemon accounts sessions (cgroups), their CPU and memory are charted while they run.
    if ((await session(r.sessionId))?.resources) {
      await page.locator('.chart canvas').first().waitFor({ timeout: 20_000 });
      // Sessions in cgroups can be frozen and thawed from the page (SPEC §15).
      await page.getByRole('button', { name: 'Pause' }).click();
      await waitFor(async () => (await session(r.sessionId))?.paused === true, { what: 'the session to be paused' });
      await page.getByRole('button', { name: 'Continue' }).click();
      await waitFor(async () => !(await session(r.sessionId))?.paused, { what: 'the session to continue' });
    }
    await page.getByRole('button', { name: 'Kill' }).click();
    await waitFor(async () => (await session(r.sessionId))?.status === 'failed', { what: 'the session to end' });
    expect(await session(r.sessionId)).toMatchObject({ status: 'failed', reason: 'user' });
    await page.locator('.session .status', { hasText: 'failed' }).waitFor({ timeout: 20_000 });
    await page.close();
  });

  it('the table shows readiness and the rule that decided', async () => {
    const page = await open();
    const r = await c.exec({ command: 'echo warming; sleep 0.5; echo up-now; sleep 600', waitFor: { output: 'up-now' }, background: true, yieldMs: 0, scope: 'agent' });
    const row = page.locator(`tr[data-session="${r.sessionId}"]`);
    await row.locator('td.ready', { hasText: 'ready: ' }).waitFor({ timeout: 30_000 });
    expect(await row.locator('td.ready').innerText()).toMatch(/^ready: .*up-now/);
    const asked = await c.exec({ command: `touch ${join(dir, 'ruled')}`, scope: 'agent' });
    const ruled = page.locator(`tr[data-session="${asked.sessionId}"] td.rule`);
    await ruled.waitFor({ timeout: 30_000 });
    expect(await ruled.innerText()).toBe('ask by rule 0');
    expect(await ruled.getAttribute('title')).toBe('creates files');
    await c.process({ action: 'kill', sessionId: r.sessionId, scope: 'agent' });
    await c.process({ action: 'resume', sessionId: asked.sessionId, input: { confirm: false }, scope: 'agent', ...asPerson(d) });
    await page.close();
  });

  it('lists the shells with their state, workdir and count, and each command under its shell', async () => {
    const page = await open();
    const first = await c.exec({ command: `cd ${dir}; echo one`, shell: 'dev', scope: 'agent' });
    const busy = await c.exec({ command: 'echo two; sleep 600', shell: 'dev', scope: 'agent', waitFor: { output: 'two' }, yieldMs: 20_000 });
    expect(busy.status).toBe('running');
    const row = page.locator('table.shells tr[data-shell="dev"][data-scope="agent"]');
    // The row as it is once the second command runs: a push from the moment the first had said its
    // end but not yet finished (busy, one command) is not this one.
    await page.locator(`table.shells tr[data-shell="dev"][data-session="${busy.sessionId}"]`).waitFor({ timeout: 30_000 });
    expect(await row.locator('td.status').innerText()).toBe('busy');
    expect(await row.locator('td.cmd').innerText()).toBe(dir);
    expect(await row.locator('td.count').innerText()).toBe('2');
    expect(await row.locator('td.runtime').innerText()).toMatch(/ago$/);
    const commands = page.locator('table.shells tr.shell-commands[data-shell="dev"]');
    // Newest first, each a link to its session.
    await commands.locator(`li[data-session="${first.sessionId}"]`).waitFor({ timeout: 30_000 });
    const listed = await commands.locator('li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-session')));
    expect(listed).toEqual([busy.sessionId, first.sessionId]);
    expect(await commands.locator(`li[data-session="${first.sessionId}"] .command`).innerText()).toBe(`cd ${dir}; echo one`);
    expect(await commands.locator(`li[data-session="${first.sessionId}"] a`).getAttribute('href')).toContain(first.sessionId);
    await c.process({ action: 'kill', sessionId: busy.sessionId, scope: 'agent' });
    await row.locator('td.status', { hasText: 'idle' }).waitFor({ timeout: 30_000 });
    // A closed shell leaves the list.
    await c.call('shell.close', { name: 'dev', scope: 'agent' });
    await row.waitFor({ state: 'detached', timeout: 30_000 });
    await page.close();
  });

  it('answers a y/N prompt from the page', async () => {
    const r = await c.exec({ command: 'printf "Proceed? [y/N] "; read a; echo "answer=$a"', background: true, scope: 'agent' });
    const page = await open(sessionRoute(r.sessionId));
    await page.locator('.prompt').getByRole('button', { name: 'Yes' }).click({ timeout: 20_000 });
    await waitFor(async () => (await session(r.sessionId))?.status === 'completed', { what: 'the prompt to be answered' });
    const log = await c.process({ action: 'log', sessionId: r.sessionId, scope: 'agent' });
    expect(log.output).toContain('answer=y');
    await page.close();
  });

  it('shows a terminal (pty) session in the terminal emulator, and what is typed there reaches it', async () => {
    const r = await c.exec({ command: 'printf "\\033[31mred-text\\033[0m\\n"; read line; echo "got:$line"', pty: true, background: true, scope: 'agent' });
    const page = await open(sessionRoute(r.sessionId));
    const rows = page.locator('.term-box .xterm-rows');
    await waitFor(async () => (await rows.innerText().catch(() => '')).includes('red-text'), { what: 'the terminal to show the output' });
    await page.locator('.term-box').click();
    await page.keyboard.type('typed');
    await page.keyboard.press('Enter');
    await waitFor(async () => (await rows.innerText()).includes('got:typed'), { what: 'the typed line echoed back' }).catch(async (err) => {
      throw new Error(`${err.message}; the terminal shows: ${await rows.innerText()}`);
    });
    await page.close();
  });
});

describe.skipIf(!CHROMIUM)('what a hostile page or name gets', () => {
  let evil: Server | undefined;
  afterAll(() => evil?.close());

  it('a page of another origin (another port of loopback: the same site) cannot post to the console', async () => {
    const r = await c.exec({ command: 'sleep 600', background: true, scope: 'agent' });
    const body = JSON.stringify({ action: 'kill', sessionId: r.sessionId });
    // The attacker's page: same host, another port, so the browser even sends the SameSite cookie.
    evil = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end('<!doctype html><title>evil</title><p>hello</p>');
    });
    await new Promise<void>((ok) => evil!.listen(0, '127.0.0.1', ok));
    const page = await person.newPage();
    await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
    const results = await page.evaluate(
      async ({ target, body }) => {
        const tries: Record<string, string> = {};
        for (const [name, init] of [
          ['json', { method: 'POST', credentials: 'include', headers: { 'content-type': 'application/json' }, body }],
          ['no-cors text', { method: 'POST', credentials: 'include', mode: 'no-cors', headers: { 'content-type': 'text/plain' }, body }],
          ['no-cors form', { method: 'POST', credentials: 'include', mode: 'no-cors', body: new URLSearchParams({ action: 'kill' }) }],
        ] as [string, RequestInit][]) {
          try {
            const res = await fetch(target, init);
            tries[name] = `${res.type} ${res.status}`;
          } catch (e) {
            tries[name] = `refused: ${(e as Error).message}`;
          }
        }
        return tries;
      },
      { target: `${ui.origin}/api/act`, body },
    );
    expect(results.json).toMatch(/^refused/);
    await page.close();
    // Whatever the browser let through, the console refused: the session runs on.
    expect((await session(r.sessionId))?.status).toBe('running');
    await c.process({ action: 'kill', sessionId: r.sessionId, scope: 'agent' });
  });

  it('a name rebound to loopback gets 421, and a browser without the cookie gets nothing', async () => {
    const page = await person.newPage();
    const rebound = await page.goto(`http://${REBOUND}:${ui.port}/`);
    expect(rebound?.status()).toBe(421);
    const stranger = await browser.newContext();
    const other = await stranger.newPage();
    const res = await other.goto(`${ui.origin}/`);
    expect(res?.status()).toBe(401);
    expect(await other.locator('body').innerText()).toMatch(/link procctl ui printed/);
    // The spent link gives a second browser nothing either.
    expect((await other.goto(ui.url))?.status()).toBe(403);
    await stranger.close();
    await page.close();
  });
});
