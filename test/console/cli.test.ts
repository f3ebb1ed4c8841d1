import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from '../helpers/daemon.js';
import { cli } from '../cli/run.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-ui-cli-'));
afterAll(async () => {
  await stopAllDaemons();
  rmSync(dir, { recursive: true, force: true });
});

describe('procctl ui: bad input is named with its fix', () => {
  it('refuses a --listen address that is not loopback, and --port with a socket path', async () => {
    const r = await cli(['--socket', join(dir, 'none.sock'), 'ui', '--listen', '0.0.0.0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/--listen 0\.0\.0\.0 is not a loopback address/);
    expect(r.stdout).toBe('');
    const p = await cli(['--socket', join(dir, 'none.sock'), 'ui', '--listen', join(dir, 'c.sock'), '--port', '8080']);
    expect(p.stderr).toMatch(/--port goes with a TCP address/);
    const n = await cli(['ui', '--port', 'x']);
    expect(n.code).toBe(2);
  });

  it('refuses a ui --host that is neither local nor ssh://, or a host named twice (a usage error)', async () => {
    const r = await cli(['--socket', join(dir, 'none.sock'), 'ui', '--host', 'local', '--host', 'web1']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--host web1: .*ssh:\/\//);
    const twice = await cli(['--socket', join(dir, 'none.sock'), 'ui', '--host', 'local', '--host', 'local']);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toMatch(/"local" is given twice/);
    // Every other command takes one ssh:// --host, as before.
    const ps = await cli(['--host', 'local', 'ps']);
    expect(ps.code).toBe(2);
    expect(ps.stderr).toMatch(/no ssh:\/\/ in front/);
  });

  it('says when no daemon listens (exit 3), before anything about credentials', async () => {
    const r = await cli(['--socket', join(dir, 'none.sock'), 'ui']);
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(join(dir, 'none.sock'));
    expect(r.stdout).toBe('');
  });

  it("with an approver credential the daemon does not know, says the daemon refused the console as the operator", async () => {
    const d = await startDaemon();
    const r = await cli(['--socket', d.socket, 'ui'], { env: { PROCCTL_APPROVER_TOKEN: 'not-the-credential' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/does not take the console as the operator.*PROCCTL_ADMIN_TOKEN/);
    await d.stop();
  });
});
