import pty, { type IPty } from '@lydell/node-pty';
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { alive, PROCCTL, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { cli, killChildren, spawnCli, waitForOutput, type CliChild } from '../cli/run.js';
import { findSshd, loginHangs, startSshd, type TestSshd } from './sshd.js';

const { sshd, missing } = findSshd();
if (missing) console.warn(`skipping the remote tests: ${missing}`);
// Every test logs in over ssh: a login that hangs would time each of them out in turn (a minute
// each), saying nothing of why. Checked once, first; the tests are skipped saying what hung.
const hung = sshd ? await loginHangs(sshd) : undefined;
if (hung) console.warn(`skipping the ssh tests: ${hung}`);
const SKIP = !sshd || hung !== undefined;
/** A skipped test says why in its name. */
const why = (title: string) => (hung ? `${title} (skipped: a forced-command login over ssh hangs here; the reason is printed above)` : title);

let d: TestDaemon;
let c: TestClient;
let s: TestSshd;
const terminals = new Set<IPty>();

beforeAll(async () => {
  if (SKIP) return;
  d = await startDaemon();
  c = await d.client();
  s = await startSshd(sshd, d.socket);
});
afterEach(() => {
  killChildren();
  for (const t of terminals) {
    try {
      process.kill(t.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  terminals.clear();
});
afterAll(async () => {
  c?.close();
  await s?.stop();
  await stopAllDaemons();
});

type Key = Parameters<TestSshd['sshCommand']>[0];

/** `procctl --host ssh://… ARGS` logging in with `key` (the one that reaches the test daemon by default). */
const remote = (args: string[], opts: { input?: string; key?: Key } = {}) =>
  cli(['--host', s.url, ...args], { input: opts.input, env: { PROCCTL_SSH_COMMAND: s.sshCommand(opts.key ?? 'good') } });
const remoteChild = (args: string[]) => spawnCli(['--host', s.url, ...args], { env: { PROCCTL_SSH_COMMAND: s.sshCommand('good') } });

/** The processes a CLI child started (its ssh), from /proc. */
function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

async function sessionOf(command: string): Promise<any> {
  const { sessions } = await c.process({ action: 'list' });
  return sessions.find((x: any) => x.command === command);
}

describe.skipIf(SKIP)(why('procctl --host ssh:// against a real sshd with a forced command'), () => {
  it('runs a command there in the foreground: output, stdin, exit status', async () => {
    const r = await remote(['exec', '--', 'cat; echo to-err >&2; exit 4'], { input: 'hello over ssh\n' });
    expect(r.stdout).toBe('hello over ssh\n');
    expect(r.stderr).toContain('to-err\n');
    expect(r.code).toBe(4);
    // It ran in the daemon behind sshd.
    expect((await sessionOf('cat; echo to-err >&2; exit 4')).exitCode).toBe(4);
  });

  it("runs in the daemon's own directory there, not in this host's current directory, unless --cwd is given", async () => {
    const opts = { cwd: '/proc', env: { PROCCTL_SSH_COMMAND: s.sshCommand('good') } };
    const r = await cli(['--host', s.url, 'exec', '--', 'pwd'], opts);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe(`${readlinkSync(`/proc/${d.proc.pid}/cwd`)}\n`);
    const given = await cli(['--host', s.url, 'exec', '--cwd', '/usr', '--', 'pwd'], opts);
    expect(given.stdout).toBe('/usr\n');
  });

  it('lists sessions with ps, and takes the host from $PROCCTL_HOST', async () => {
    const { sessionId } = await c.exec({ command: 'echo listed-remotely', background: true });
    const r = await remote(['ps']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(sessionId);
    const viaEnv = await cli(['--json', 'ps'], { env: { PROCCTL_HOST: s.url, PROCCTL_SSH_COMMAND: s.sshCommand('good') } });
    expect(viaEnv.code).toBe(0);
    expect(JSON.parse(viaEnv.stdout).sessions.map((x: any) => x.sessionId)).toContain(sessionId);
  });

  it('follows a log with log -f until the session ends', async () => {
    const gate = join(d.dir, 'log-gate');
    const { sessionId: id } = await c.exec({ command: `echo before; while [ ! -e ${gate} ]; do sleep 0.05; done; echo after`, background: true });
    const child = remoteChild(['log', '-f', id]);
    await waitForOutput(child, 'before\n');
    writeFileSync(gate, '');
    const r = await child.exited;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('before\nafter\n');
  });

  it('streams events with events -f, and its ssh goes when it is killed', async () => {
    const child = remoteChild(['events', '-f']);
    await waitFor(() => child.stderr().includes('watching events'), { what: 'events -f to start watching' });
    const ssh = childrenOf(child.proc.pid!);
    expect(ssh.length).toBe(1);
    const { sessionId: id } = await c.exec({ command: 'echo evented' });
    await waitForOutput(child, new RegExp(`${id}.*exited`), `the exited event of ${id}`);
    expect(child.stdout()).toContain('evented');
    child.proc.kill('SIGKILL');
    await child.exited;
    await waitFor(() => !alive(ssh[0]), { what: 'ssh to end with its procctl' });
  });

  it('reports a lost connection when the far daemon goes away mid-stream', async () => {
    const far = await startDaemon();
    const farSshd = await startSshd(sshd!, far.socket);
    try {
      const child: CliChild = spawnCli(['--host', farSshd.url, 'events', '-f'], { env: { PROCCTL_SSH_COMMAND: farSshd.sshCommand('good') } });
      await waitFor(() => child.stderr().includes('watching events'), { what: 'events -f to start watching' });
      await far.stop();
      const r = await child.exited;
      expect(r.code).toBe(3);
      expect(r.stderr).toContain(`lost the connection to procctld at ${farSshd.url}`);
    } finally {
      await farSshd.stop();
    }
  });

  /** `procctl --host … ARGS` in a pseudo-terminal, as a person at a terminal would run it. */
  function inTerminal(args: string[]) {
    const env: Record<string, string> = {};
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('PROCCTL_')) env[k] = v;
    env.PROCCTL_SSH_COMMAND = s.sshCommand('good');
    const t = pty.spawn(process.execPath, [PROCCTL, '--host', s.url, ...args], { cols: 100, rows: 30, env });
    terminals.add(t);
    let screen = '';
    t.onData((data) => (screen += data));
    const exited = new Promise<number>((resolve) => t.onExit(({ exitCode }) => resolve(exitCode)));
    const seen = (text: string) => waitFor(() => screen.includes(text), { what: `the terminal to show ${JSON.stringify(text)}` });
    return { screen: () => screen, write: (data: string) => t.write(data), exited, seen };
  }

  it('attaches a terminal to a pty session there, and detaches with Ctrl-]', async () => {
    const { sessionId: id } = await c.exec({ command: 'echo attached-remotely; cat', pty: true, background: true });
    const t = inTerminal(['attach', id]);
    await t.seen('press Ctrl-] to detach');
    expect(t.screen()).toContain('attached-remotely');
    const before = t.screen().length;
    t.write('typed-over-ssh\r');
    await waitFor(() => t.screen().slice(before).split('typed-over-ssh').length > 2, { what: 'the session to echo and cat the line' });
    t.write('\x1d');
    expect(await t.exited).toBe(0);
    const { sessions } = await c.process({ action: 'list' });
    expect(sessions.find((x: any) => x.sessionId === id).status).toBe('running');
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });

  it('Ctrl-C at the terminal reaches the session there, not ssh', async () => {
    const command = 'trap "echo got-INT; exit 7" INT; echo ready; sleep 30 & wait';
    const t = inTerminal(['exec', '--', command]);
    await t.seen('ready');
    t.write('\x03');
    await t.seen('got-INT');
    expect(await t.exited).toBe(7);
    expect((await sessionOf(command)).exitCode).toBe(7);
  });
});

describe.skipIf(SKIP)(why('when ssh cannot reach the daemon there'), () => {
  it('says a port with no sshd cannot be connected to, with ssh’s own line, and exits 3', async () => {
    const url = `ssh://${s.user}@127.0.0.1:1`;
    const r = await cli(['--host', url, 'ps'], { env: { PROCCTL_SSH_COMMAND: s.sshCommand('good') } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain(`cannot reach procctld at ${url} (ssh cannot connect: ssh: connect to host 127.0.0.1 port 1: Connection refused)`);
    expect(r.stderr).toContain('check the host and port, and that sshd runs on 127.0.0.1');
  });

  it('says a key the host refuses could not log in, and how to fix it', async () => {
    const r = await remote(['ps'], { key: 'stranger' });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/ssh could not log in: .*Permission denied \(publickey\)/);
    expect(r.stderr).toContain('authorized_keys');
    expect(r.stdout).toBe('');
  });

  it('says procctl cannot be run there when it is missing', async () => {
    const r = await remote(['ps'], { key: 'noprocctl' });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/procctl cannot be run there: .*not-installed\/procctl: No such file or directory/);
    expect(r.stderr).toContain('install procctl on 127.0.0.1');
  });

  it('says procctld is not running there, quoting the far side', async () => {
    const r = await remote(['ps'], { key: 'nodaemon' });
    expect(r.code).toBe(3);
    expect(r.stderr).toMatch(/procctld is not running there: procctl: cannot reach procctld at \S+nobody\.sock \(no socket there\)/);
    expect(r.stderr).toContain('start procctld on 127.0.0.1');
  });

  it('says an ssh command that is not installed is not found, without running anything', async () => {
    const r = await cli(['--host', s.url, 'ps'], { env: { PROCCTL_SSH_COMMAND: 'no-such-ssh-client -v' } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('cannot run "no-such-ssh-client": not found on PATH');
    expect(r.stderr).toContain('PROCCTL_SSH_COMMAND');
  });

  it('refuses an address that is not ssh:// as a usage error', async () => {
    const r = await cli(['--host', 'http://127.0.0.1', 'ps']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('is not an ssh:// address; write the host as ssh://[user@]host[:port]');
    const env = await cli(['ps'], { env: { PROCCTL_HOST: 'example.com' } });
    expect(env.code).toBe(3);
    expect(env.stderr).toContain('has no ssh:// in front');
    expect(env.stderr).toContain('unset it to use the local daemon');
  });
});

describe.skipIf(SKIP)(why('the check made before the ssh tests'), () => {
  it('takes a forced-command login that does not end for a hang, and names what was still running', async () => {
    // The forced command stands in for a login shell that hangs: to the check it is the same.
    const said = await loginHangs(sshd!, { command: '/bin/sleep 321', timeoutMs: 3_000 });
    expect(said).toContain("a forced-command login (`/bin/sleep 321`) over the test's own sshd did not finish within 3 s");
    expect(said).toMatch(/under sshd then: .*\d+ \/bin\/sleep 321/);
    expect(said).toMatch(/-c '\/bin\/sleep 321'`/);
    expect(said).toContain('ps -ef --forest');
    // What it started is gone: nothing runs sleep 321 any more.
    await waitFor(() => !readdirSync('/proc').some((p) => /^\d+$/.test(p) && cmdline(p) === '/bin/sleep 321'), { what: 'the hung login to be killed' });
  });
});

function cmdline(pid: string): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').filter(Boolean).join(' ');
  } catch {
    return '';
  }
}
