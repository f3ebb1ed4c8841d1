import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { connectOrStart } from '../../src/mcp/start.js';
import { cannotActAsAnotherUser } from '../helpers/caps.js';
import { startDaemon, waitFor } from '../helpers/daemon.js';
import { killLeftovers, spawnProcctld, stopRawDaemons } from '../helpers/procs.js';
import { Scoped, within } from '../helpers/session.js';
import { cli } from '../cli/run.js';

/**
 * The socket directory and the daemon's files are ours (SPEC §2), tried as another local user
 * would: `nobody` squats the directory a root daemon would use, or listens where a client looks.
 */

const ROOT = process.getuid?.() === 0;
const NOBODY = 65534;
const base = mkdtempSync(join(tmpdir(), 'procctl-sockdir-'));
chmodSync(base, 0o755);
const started = new Set<number>();

afterAll(async () => {
  await stopRawDaemons();
  killLeftovers(started);
  rmSync(base, { recursive: true, force: true });
});

describe.skipIf(!ROOT)('the socket directory', () => {
  it("a directory another user made (and could write) is refused, naming it; nothing is created in it", async () => {
    const squatted = join(base, 'squatted');
    mkdirSync(squatted, { mode: 0o777 });
    chmodSync(squatted, 0o777);
    chownSync(squatted, NOBODY, NOBODY);
    const raw = spawnProcctld(['--socket', join(squatted, 'procctl.sock')], { PROCCTL_STATE_DIR: join(base, 'state-1') });
    const code = await within(raw.exited, 20_000, 'procctld to refuse');
    expect(code).not.toBe(0);
    expect(raw.stderr()).toContain(`the socket directory ${squatted} belongs to uid ${NOBODY}`);
    expect(existsSync(join(squatted, 'procctl.sock'))).toBe(false);
    expect(existsSync(join(squatted, 'procctl.sock.d'))).toBe(false);
  });

  it('a directory of ours that group or others may write is refused too', async () => {
    const loose = join(base, 'loose');
    mkdirSync(loose);
    chmodSync(loose, 0o777);
    const raw = spawnProcctld(['--socket', join(loose, 'procctl.sock')], { PROCCTL_STATE_DIR: join(base, 'state-2') });
    expect(await within(raw.exited, 20_000, 'procctld to refuse')).not.toBe(0);
    expect(raw.stderr()).toContain(`the socket directory ${loose} is writable by everyone`);
  });

  it.skipIf(cannotActAsAnotherUser() !== undefined)("another user cannot swap or read the scratch directories a daemon makes ahead of its sessions", async () => {
    const d = await startDaemon({ base });
    try {
      const sessions = join(`${d.socket}.d`, 'sessions');
      const spare = await waitFor(() => (existsSync(sessions) ? readdirSync(sessions)[0] : undefined), { what: 'a spare scratch directory' });
      const dir = join(sessions, spare);
      const asNobody = (...cmd: string[]) => spawnSync(cmd[0], cmd.slice(1), { uid: NOBODY, gid: NOBODY, encoding: 'utf8' });
      const moved = asNobody('mv', dir, `${dir}.gone`);
      expect(moved.status).not.toBe(0);
      expect(moved.stderr).toMatch(/Permission denied/);
      expect(asNobody('ls', sessions).status).not.toBe(0);
      expect(existsSync(dir)).toBe(true);
      const r = await new Scoped(await d.client(), 'default').exec({ command: 'echo "$PROCCTL_TMPDIR"' });
      expect(r.output.trim().startsWith(`${sessions}/`)).toBe(true);
    } finally {
      await d.stop();
    }
  });

  it("procctl mcp starts no daemon there, and a log symlink planted there is never followed", async () => {
    const squatted = join(base, 'squatted-mcp');
    mkdirSync(squatted);
    const victim = join(base, 'root-only-file');
    writeFileSync(victim, 'untouched\n', { mode: 0o600 });
    symlinkSync(victim, join(squatted, 'procctld.log'));
    chmodSync(squatted, 0o777);
    chownSync(squatted, NOBODY, NOBODY);
    await expect(connectOrStart(join(squatted, 'procctl.sock'))).rejects.toThrow(/belongs to uid 65534/);
    expect(readFileSync(victim, 'utf8')).toBe('untouched\n');
  });

  it("a client sends nothing, token least of all, to a socket another user listens on", async () => {
    const dir = join(base, 'fake');
    mkdirSync(dir, { mode: 0o777 });
    chmodSync(dir, 0o777);
    const sock = join(dir, 'procctl.sock');
    const got = join(dir, 'got');
    // A listener running as nobody, writing down whatever it receives.
    const listener = spawn(
      'setpriv',
      ['--reuid', String(NOBODY), '--regid', String(NOBODY), '--clear-groups', process.execPath, '-e',
        `const fs=require('fs');require('net').createServer(s=>s.on('data',b=>fs.appendFileSync(${JSON.stringify(got)},b))).listen(${JSON.stringify(sock)},()=>fs.chmodSync(${JSON.stringify(sock)},0o777))`],
      { stdio: 'ignore' },
    );
    started.add(listener.pid!);
    try {
      await waitFor(() => existsSync(sock), { what: 'the fake listener' });
      const r = await cli(['--socket', sock, '--token', 'the-secret-token', 'ps']);
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(`runs as uid ${NOBODY}, not as you`);
      expect(existsSync(got) ? readFileSync(got, 'utf8') : '').not.toContain('the-secret-token');
    } finally {
      listener.kill('SIGKILL');
    }
  });
});
