import { createHash } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { cookieOf, http, startConsole, stopAllConsoles } from './console.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-ui-admin-'));
afterAll(async () => {
  await stopAllConsoles();
  await stopAllDaemons();
  rmSync(dir, { recursive: true, force: true });
});

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe('a console with the adminToken only (no approver credential beside the socket)', () => {
  it('sees every scope and answers approvals with the adminToken', async () => {
    // With approvals.approverToken in the config the daemon writes no credential file: the console has the adminToken alone.
    const d = await startDaemon({
      config: {
        adminToken: `sha256:${sha256('0perator')}`,
        approvals: { approverToken: `sha256:${sha256('the-approver')}`, rules: [{ command: ['touch'], action: 'ask' }] },
      },
    });
    expect(existsSync(`${d.socket}.approver`)).toBe(false);
    const ui = await startConsole(d, [], { PROCCTL_ADMIN_TOKEN: '0perator' });
    const c = await d.client();
    const mark = join(dir, 'approved-by-admin');
    const r = await c.exec({ command: `touch ${mark}`, scope: 'agent' });
    expect(r.status).toBe('approval_required');
    const cookie = await cookieOf(ui);
    const { csrf } = JSON.parse((await http(`${ui.origin}/api/session`, { headers: { cookie } })).body);
    const headers = { 'content-type': 'application/json', cookie, origin: ui.origin, 'x-csrf-token': csrf };
    const missing = await http(`${ui.origin}/api/act`, { method: 'POST', headers, body: JSON.stringify({ action: 'kill', sessionId: 'nosuchid' }) });
    expect(missing.status).toBe(404);
    expect(JSON.parse(missing.body).kind).toBe('not_found');
    const noId = await http(`${ui.origin}/api/act`, { method: 'POST', headers, body: JSON.stringify({ action: 'kill', all: true }) });
    expect(noId.status).toBe(400);
    const ok = await http(`${ui.origin}/api/act`, { method: 'POST', headers, body: JSON.stringify({ action: 'resume', sessionId: r.sessionId, input: { confirm: true } }) });
    expect(ok.status, ok.body).toBe(200);
    await waitFor(() => existsSync(mark), { what: 'the approved command to run' });
    c.close();
    await ui.stop();
    await d.stop();
  });
});
