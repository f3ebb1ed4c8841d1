import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { findSshd, startSshd, type TestSshd } from '../remote/sshd.js';
import { cookieOf, pushesUntil, startConsole, stopAllConsoles } from './console.js';

const { sshd, missing } = findSshd();
if (missing) console.warn(`skipping the console's remote test: ${missing}`);

let d: TestDaemon;
let c: TestClient;
let s: TestSshd;

beforeAll(async () => {
  if (!sshd) return;
  d = await startDaemon();
  c = await d.client();
  s = await startSshd(sshd, d.socket);
});

afterAll(async () => {
  c?.close();
  await stopAllConsoles();
  await s?.stop();
  await stopAllDaemons();
});

describe.skipIf(!sshd)('procctl --host ssh://… ui', () => {
  it("serves the other host's daemon through ssh, its credential given as $PROCCTL_APPROVER_TOKEN", async () => {
    const approver = readFileSync(`${d.socket}.approver`, 'utf8').trim();
    const ui = await startConsole(d, [], { PROCCTL_SSH_COMMAND: s.sshCommand('good'), PROCCTL_APPROVER_TOKEN: approver }, ['--host', s.url]);
    const r = await c.exec({ command: 'echo over-ssh', scope: 'far' });
    const cookie = await cookieOf(ui);
    const pushed = await pushesUntil(ui, cookie, (text) => text.includes(r.sessionId));
    expect(pushed).toMatch(/event: sessions\ndata: .*"command":"echo over-ssh"/);
    expect(pushed).toMatch(/event: daemon\ndata: \{"connected":true/);
    await ui.stop();
  });
});
