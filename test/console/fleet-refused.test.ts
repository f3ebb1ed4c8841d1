import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { TestClient } from '../helpers/rpc.js';
import { findSshd, startSshd, type TestSshd } from '../remote/sshd.js';
import { CHROMIUM, cookieOf, daemonAt, launchBrowser, pushesUntil, startConsole, stopAllConsoles, stopPlacedDaemons, type TestConsole } from './console.js';

/**
 * A host of the fleet view the console cannot act on as the operator: the far daemon's credential
 * file is on the far host, and no $PROCCTL_APPROVER_TOKEN_FAR or $PROCCTL_ADMIN_TOKEN_FAR is set.
 * The console reaches it, and must say it is refused and what to set, never show it connected
 * with an empty table.
 */

const { sshd, missing } = findSshd();
if (missing) console.warn(`skipping the console's refused-host test: ${missing}`);

const dir = mkdtempSync(join(tmpdir(), 'procctl-refused-'));
const localSocket = join(dir, 'run', 'procctl.sock');
let far: TestDaemon;
let s: TestSshd;
let ui: TestConsole;
/** The console's cookie, traded once for its one-time link. */
let cookie: string;

beforeAll(async () => {
  if (!sshd) return;
  far = await startDaemon();
  s = await startSshd(sshd, far.socket);
  await daemonAt(localSocket, dir);
  ui = await startConsole({ socket: localSocket, env: process.env }, ['--host', 'local', '--host', `far=${s.url}`], {
    PROCCTL_SSH_COMMAND: s.sshCommand('good'),
    // Nothing names far's credential; the local daemon's is read beside its socket.
    PROCCTL_APPROVER_TOKEN: '',
    PROCCTL_ADMIN_TOKEN: '',
  });
}, 120_000);

afterAll(async () => {
  await stopAllConsoles();
  await s?.stop();
  stopPlacedDaemons();
  await stopAllDaemons();
  rmSync(dir, { recursive: true, force: true });
});

/** Each host's last `daemon` push in a stream's text, by host. */
function views(text: string): Map<string, Record<string, unknown>> {
  const out = new Map<string, Record<string, unknown>>();
  for (const m of text.matchAll(/event: daemon\ndata: (.*)\n/g)) {
    const v = JSON.parse(m[1]) as Record<string, unknown>;
    out.set(String(v.host), v);
  }
  return out;
}

describe.skipIf(!sshd)('procctl ui --host local --host far=ssh://… without far\'s credential', () => {
  it('says at start that far refused the console as the operator, and what to set', () => {
    expect(ui.stderr()).toMatch(/host far: the daemon does not take the console as the operator: .*\$PROCCTL_ADMIN_TOKEN_FAR.*\$PROCCTL_APPROVER_TOKEN_FAR.*shown as refused/);
  });

  it('shows far as refused with why (in the pushes the page reads), also after it was tried again; local goes on', async () => {
    // The console tries far again (another ssh login): it must still be refused, not "connected".
    await waitFor(() => (s.log().match(/Accepted publickey/g) ?? []).length >= 2, { timeoutMs: 60_000, what: 'the console to try far again' });
    const local = await TestClient.connect(localSocket);
    const here = await local.exec({ command: 'echo on-the-local-host', scope: 'fleet' });
    local.close();
    cookie = await cookieOf(ui);
    const pushed = await pushesUntil(ui, cookie, (text) => text.includes(here.sessionId) && views(text).has('far'), 30_000);
    const farView = views(pushed).get('far')!;
    expect(farView).toMatchObject({ connected: false, refused: true });
    expect(String(farView.problem)).toMatch(/does not take the console as the operator.*set \$PROCCTL_ADMIN_TOKEN_FAR .*\$PROCCTL_APPROVER_TOKEN_FAR/);
    expect(views(pushed).get('local')).toMatchObject({ connected: true });
  });

  it.skipIf(!CHROMIUM)('the page says so in far\'s host status', async () => {
    const browser = await launchBrowser();
    try {
      const context = await browser.newContext();
      cookie ??= await cookieOf(ui);
      const [name, value] = cookie.split(/=(.*)/s);
      await context.addCookies([{ name, value, url: ui.origin }]);
      const page = await context.newPage();
      await page.goto(`${ui.origin}/`);
      const state = page.locator('li.host.refused[data-host="far"] .state');
      await state.waitFor({ timeout: 30_000 });
      expect(await state.innerText()).toMatch(/^the daemon does not take the console as the operator: .*\$PROCCTL_APPROVER_TOKEN_FAR.*; trying again$/);
      await page.locator('li.host[data-host="local"] .state', { hasText: /^connected/ }).waitFor({ timeout: 30_000 });
    } finally {
      await browser.close();
    }
  });
});
