import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { spawnProcctld, stopRawDaemons, type RawDaemon } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { within } from '../helpers/session.js';

let scratch: string;

beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), 'procctl-start-'));
});

afterAll(async () => {
  await stopRawDaemons();
  await stopAllDaemons();
  rmSync(scratch, { recursive: true, force: true });
});

const mode = (path: string) => statSync(path).mode & 0o777;

/** Env for a daemon that must not pick up a config or state from the machine. */
function isolated(name: string): Record<string, string> {
  return { XDG_CONFIG_HOME: join(scratch, name, 'config'), PROCCTL_STATE_DIR: join(scratch, name, 'state') };
}

async function listening(d: RawDaemon, socket: string): Promise<TestClient> {
  return waitFor<TestClient | undefined>(
    async () => {
      if (d.proc.exitCode !== null) throw new Error(`procctld exited with ${d.proc.exitCode}: ${d.stderr()}`);
      let c: TestClient;
      try {
        c = await TestClient.connect(socket);
      } catch {
        return undefined;
      }
      // One answered request: start-up has finished (signal handlers are in place) before we signal it.
      await c.call('daemon.status');
      return c;
    },
    { what: `procctld to listen on ${socket}` },
  ) as Promise<TestClient>;
}

async function stopped(d: RawDaemon): Promise<number | string | null> {
  d.proc.kill('SIGTERM');
  return within(d.exited, 20_000, 'procctld to exit');
}

/** Start a daemon that should refuse to start; returns its exit code and stderr. */
async function refused(args: string[], env: Record<string, string>): Promise<{ code: number | string | null; stderr: string }> {
  const d = spawnProcctld(args, env);
  const code = await within(d.exited, 20_000, 'procctld to exit');
  return { code, stderr: d.stderr() };
}

describe('the socket', () => {
  it('is created 0600 in a 0700 directory and answers daemon.status', async () => {
    const d = await startDaemon();
    expect(mode(dirname(d.socket))).toBe(0o700);
    expect(mode(d.socket)).toBe(0o600);
    expect(statSync(d.socket).isSocket()).toBe(true);
    const c = await d.client();
    const st = await c.call('daemon.status');
    expect(st.pid).toBe(d.proc.pid);
    expect(st.socket).toBe(d.socket);
    expect(typeof st.version).toBe('string');
    expect(st.uptimeMs).toBeGreaterThanOrEqual(0);
    expect(st.sessions).toEqual({ running: 0, finished: 0 });
    c.close();
    expect(await d.stop()).toBe(0);
  });

  it('tightens an existing directory that others could read to 0700', async () => {
    const dir = join(scratch, 'loose');
    mkdirSync(dir, { mode: 0o755 });
    const socket = join(dir, 'procctl.sock');
    const d = spawnProcctld(['--socket', socket], isolated('loose'));
    (await listening(d, socket)).close();
    expect(mode(dir)).toBe(0o700);
    expect(mode(socket)).toBe(0o600);
    expect(await stopped(d)).toBe(0);
  });

  it('replaces a stale socket file that nothing listens on', async () => {
    const dir = join(scratch, 'stale');
    mkdirSync(dir, { mode: 0o700 });
    const socket = join(dir, 'procctl.sock');
    // A listener killed with SIGKILL leaves its socket file behind.
    const left = spawnSync(process.execPath, ['-e', `require('net').createServer().listen(${JSON.stringify(socket)}, () => process.kill(process.pid, 'SIGKILL'))`]);
    expect(left.signal).toBe('SIGKILL');
    expect(statSync(socket).isSocket()).toBe(true);
    await expect(TestClient.connect(socket)).rejects.toThrow();

    const d = spawnProcctld(['--socket', socket], isolated('stale'));
    const c = await listening(d, socket);
    const r = await c.call('exec', { command: 'echo alive' });
    expect(r.output).toBe('alive\n');
    c.close();
    expect(await stopped(d)).toBe(0);
  });

  it('a second daemon on a live socket exits non-zero with a clear message, and the first keeps serving', async () => {
    const first = await startDaemon();
    const { code, stderr } = await refused(['--socket', first.socket], isolated('second'));
    expect(code).not.toBe(0);
    expect(typeof code).toBe('number');
    expect(stderr).toContain(first.socket);
    expect(stderr.toLowerCase()).toMatch(/already|in use|another/);
    const c = await first.client();
    expect((await c.call('daemon.status')).pid).toBe(first.proc.pid);
    c.close();
    expect(await first.stop()).toBe(0);
  });

  it('honours $PROCCTL_SOCKET, then $XDG_RUNTIME_DIR/procctl/procctl.sock', async () => {
    const viaEnv = join(scratch, 'envsock', 'p.sock');
    const d1 = spawnProcctld([], { ...isolated('envsock'), PROCCTL_SOCKET: viaEnv });
    (await listening(d1, viaEnv)).close();
    expect(await stopped(d1)).toBe(0);

    const runtime = join(scratch, 'xdg-runtime');
    mkdirSync(runtime, { mode: 0o700 });
    const d2 = spawnProcctld([], { ...isolated('xdg'), XDG_RUNTIME_DIR: runtime, PROCCTL_SOCKET: undefined });
    const expected = join(runtime, 'procctl', 'procctl.sock');
    (await listening(d2, expected)).close();
    expect(mode(join(runtime, 'procctl'))).toBe(0o700);
    expect(await stopped(d2)).toBe(0);
  });
});

describe('configuration errors stop start-up with exit code 2', () => {
  it('an invalid environment value names the variable (or key) and the value', async () => {
    const socket = join(scratch, 'badenv', 'p.sock');
    const { code, stderr } = await refused(['--socket', socket], { ...isolated('badenv'), PROCCTL_KILL_GRACE_MS: 'abc' });
    expect(code).toBe(2);
    expect(stderr).toMatch(/PROCCTL_KILL_GRACE_MS|killGraceMs/);
    expect(stderr).toContain('abc');
    expect(() => statSync(socket)).toThrow();
  });

  it('an unknown key in the config file is named', async () => {
    const file = join(scratch, 'unknown-key.json');
    writeFileSync(file, JSON.stringify({ tools: { exec: { bogusKey: 5 } } }));
    const { code, stderr } = await refused(['--socket', join(scratch, 'uk', 'p.sock'), '--config', file], isolated('uk'));
    expect(code).toBe(2);
    expect(stderr).toContain('bogusKey');
  });

  it('a value of the wrong type in the config file names the key and the value', async () => {
    const file = join(scratch, 'wrong-type.json');
    writeFileSync(file, JSON.stringify({ tools: { exec: { maxOutputChars: 'lots' } } }));
    const { code, stderr } = await refused(['--socket', join(scratch, 'wt', 'p.sock'), '--config', file], isolated('wt'));
    expect(code).toBe(2);
    expect(stderr).toContain('maxOutputChars');
    expect(stderr).toContain('lots');
  });

  it('a config file that is not JSON, or does not exist, is named', async () => {
    const file = join(scratch, 'broken.json');
    writeFileSync(file, '{ "tools": ');
    const r1 = await refused(['--socket', join(scratch, 'bj', 'p.sock'), '--config', file], isolated('bj'));
    expect(r1.code).toBe(2);
    expect(r1.stderr).toContain(file);
    const missing = join(scratch, 'missing.json');
    const r2 = await refused(['--socket', join(scratch, 'mj', 'p.sock'), '--config', missing], isolated('mj'));
    expect(r2.code).toBe(2);
    expect(r2.stderr).toContain(missing);
  });

  it('a valid config file is used (its values apply)', async () => {
    const d = await startDaemon({ config: { tools: { exec: { maxOutputChars: 10 } } } });
    const c = await d.client();
    const r = await c.exec({ command: 'echo 0123456789abcdef' });
    expect(r.output).toBe('789abcdef\n');
    expect(r.droppedChars).toBe(7);
    c.close();
    expect(await d.stop()).toBe(0);
  });

  it('SIGHUP reloads the config file; an invalid one is rejected and the old one kept', async () => {
    const d = await startDaemon({ config: { tools: { exec: { maxOutputChars: 10 } } } });
    const c = await d.client();
    const file = join(d.dir, 'config.json');
    const outputOf = async () => (await c.exec({ command: 'echo 0123456789abcdefghij' })).output as string;
    expect(await outputOf()).toBe('bcdefghij\n');

    writeFileSync(file, JSON.stringify({ tools: { exec: { maxOutputChars: 15 } } }));
    d.proc.kill('SIGHUP');
    await waitFor(async () => (await outputOf()) === '6789abcdefghij\n', { what: 'the reloaded cap' });

    writeFileSync(file, JSON.stringify({ tools: { exec: { maxOutputChars: 'lots' } } }));
    d.proc.kill('SIGHUP');
    // The rejection is logged, and the daemon keeps serving with the last good config.
    await waitFor(() => /maxOutputChars|lots|reload/i.test(d.stdout() + d.stderr()), { what: 'the rejected reload to be logged' });
    expect(await outputOf()).toBe('6789abcdefghij\n');
    expect(d.proc.exitCode).toBeNull();
    c.close();
    expect(await d.stop()).toBe(0);
  });
});
