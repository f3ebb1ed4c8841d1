import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { basename, join } from 'node:path';
import { PROCCTL, waitFor } from '../helpers/daemon.js';
import { freePort } from '../helpers/net.js';

/** Where sshd is, or why the remote tests cannot run. */
export function findSshd(): { sshd?: string; missing?: string } {
  for (const path of ['/usr/sbin/sshd', '/usr/bin/sshd', '/sbin/sshd']) if (existsSync(path)) return { sshd: path };
  try {
    const found = execFileSync('sh', ['-c', 'command -v sshd'], { encoding: 'utf8' }).trim();
    if (found) return { sshd: found };
  } catch {
    // not on PATH either
  }
  return { missing: 'sshd is not installed (Debian: apt-get install openssh-server; .ci/run installs it)' };
}


function keypair(dir: string, name: string): { key: string; pub: string } {
  const key = join(dir, name);
  execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', `procctl-test-${name}`, '-f', key]);
  return { key, pub: readFileSync(`${key}.pub`, 'utf8').trim() };
}

export interface TestSshd {
  dir: string;
  port: number;
  user: string;
  /** `ssh://user@127.0.0.1:port`. */
  url: string;
  /** A PROCCTL_SSH_COMMAND that logs in with the named key and trusts the throwaway host key. */
  sshCommand(key: 'good' | 'stranger' | 'nodaemon' | 'noprocctl' | 'probe'): string;
  /** The sshd listening (its pid): every login is a process under it. */
  pid: number;
  /** What sshd printed (with -e), for a failing test's message. */
  log: () => string;
  stop(): Promise<void>;
}

/**
 * A real sshd on 127.0.0.1 at a free port, with its own host key and config in a temp dir, in
 * the foreground (`-D -e -f CONFIG`). Keys, each with a forced command as docs/remote.md shows:
 * `good` reaches the daemon at `socket`; `nodaemon` reaches a socket nobody listens on;
 * `noprocctl` forces a procctl that is not there; `stranger` is not authorized at all; `probe`
 * forces `probe` (`/bin/echo hi` unless given: what `loginHangs` runs).
 */
export async function startSshd(sshd: string, socket: string, probe = '/bin/echo hi'): Promise<TestSshd> {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-sshd-'));
  const port = await freePort();
  const user = userInfo().username;
  const hostKey = keypair(dir, 'host_key');
  const keys = { good: keypair(dir, 'good'), stranger: keypair(dir, 'stranger'), nodaemon: keypair(dir, 'nodaemon'), noprocctl: keypair(dir, 'noprocctl'), probe: keypair(dir, 'probe') };
  const dial = `${process.execPath} ${PROCCTL} dial-stdio`;
  writeFileSync(
    join(dir, 'authorized_keys'),
    [
      `command="${dial}",environment="PROCCTL_SOCKET=${socket}",restrict ${keys.good.pub}`,
      `command="${dial}",environment="PROCCTL_SOCKET=${join(dir, 'nobody.sock')}",restrict ${keys.nodaemon.pub}`,
      `command="${join(dir, 'not-installed', 'procctl')} dial-stdio",restrict ${keys.noprocctl.pub}`,
      `command="${probe}",restrict ${keys.probe.pub}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  const config = join(dir, 'sshd_config');
  writeFileSync(
    config,
    [
      `Port ${port}`,
      'ListenAddress 127.0.0.1',
      `HostKey ${hostKey.key}`,
      `PidFile ${join(dir, 'sshd.pid')}`,
      `AuthorizedKeysFile ${join(dir, 'authorized_keys')}`,
      // The temp dir's parents are world-writable (/tmp): fine for a throwaway test server.
      'StrictModes no',
      'UsePAM no',
      'PasswordAuthentication no',
      'KbdInteractiveAuthentication no',
      'PubkeyAuthentication yes',
      'PermitRootLogin prohibit-password',
      'PermitUserEnvironment PROCCTL_SOCKET',
      'LogLevel VERBOSE',
      '',
    ].join('\n'),
  );
  // sshd's privilege separation directory; the package's service creates it at boot.
  if (process.getuid?.() === 0) mkdirSync('/run/sshd', { recursive: true, mode: 0o755 });
  const proc: ChildProcess = spawn(sshd, ['-D', '-e', '-f', config], { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  proc.stderr!.setEncoding('utf8').on('data', (d: string) => (log += d));
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  await waitFor(
    async () => {
      if (proc.exitCode !== null) throw new Error(`sshd exited with ${proc.exitCode}: ${log}`);
      return new Promise<boolean>((resolve) => {
        const s = createConnection({ host: '127.0.0.1', port }, () => {
          s.destroy();
          resolve(true);
        });
        s.once('error', () => resolve(false));
      });
    },
    { what: 'sshd to listen' },
  );
  return {
    dir,
    port,
    user,
    pid: proc.pid!,
    url: `ssh://${user}@127.0.0.1:${port}`,
    sshCommand: (key) =>
      `ssh -F /dev/null -i ${keys[key].key} -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR`,
    log: () => log,
    async stop() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Every process below `pid` (from one scan of /proc), with its command line. */
function descendants(pid: number): { pid: number; cmd: string }[] {
  const children = new Map<number, number[]>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'latin1');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry)]);
    } catch {
      // gone meanwhile
    }
  }
  const out: { pid: number; cmd: string }[] = [];
  const walk = (p: number) => {
    for (const c of children.get(p) ?? []) {
      let cmd = '';
      try {
        cmd = readFileSync(`/proc/${c}/cmdline`, 'latin1').split('\0').filter(Boolean).join(' ');
      } catch {
        // gone meanwhile
      }
      out.push({ pid: c, cmd });
      walk(c);
    }
  };
  walk(pid);
  return out;
}

/** The login shell sshd runs a forced command with: the user's, from the passwd file. */
function loginShell(user: string): string {
  const line = readFileSync('/etc/passwd', 'utf8').split('\n').find((l) => l.startsWith(`${user}:`));
  return line?.split(':')[6] || '/bin/sh';
}

/**
 * Whether a forced-command login over a throwaway sshd hangs: sshd runs the forced command with the
 * user's login shell (`SHELL -c COMMAND`), which reads its startup files first (bash reads
 * ~/.bashrc for a command over ssh), and one that waits on something (once here: `pyenv init`
 * on a stale lock) hangs every login, so every ssh test would time out one by one. Logs in with
 * `command` forced (`/bin/echo hi`), gives it `timeoutMs`; undefined when it finished (however it
 * ended: a login that fails is the tests' to report), else the reason to skip them, naming what
 * was still running under sshd and how to see it. What it started is killed by pid.
 */
export async function loginHangs(sshd: string, { command = '/bin/echo hi', timeoutMs = 10_000 } = {}): Promise<string | undefined> {
  const s = await startSshd(sshd, join(tmpdir(), 'procctl-probe-nobody.sock'), command);
  try {
    const [ssh, ...args] = s.sshCommand('probe').split(' ');
    const client = spawn(ssh, [...args, '-p', String(s.port), `${s.user}@127.0.0.1`], { stdio: ['ignore', 'pipe', 'pipe'] });
    const ended = new Promise<boolean>((resolve) => client.once('exit', () => resolve(true)));
    const finished = await Promise.race([ended, new Promise<boolean>((resolve) => setTimeout(() => resolve(false), timeoutMs))]);
    if (finished) return undefined;
    const stuck = descendants(s.pid);
    for (const p of [client.pid!, ...stuck.map((x) => x.pid)]) {
      try {
        process.kill(p, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    const shell = loginShell(s.user);
    const running = stuck.filter((x) => x.cmd !== '').map((x) => `${x.pid} ${x.cmd}`).join('; ') || 'nothing';
    return (
      `a forced-command login (\`${command}\`) over the test's own sshd did not finish within ${Math.round(timeoutMs / 1000)} s: ` +
      `sshd runs it as \`${shell} -c '${command}'\`, which had not ended: the login shell hangs, most likely in a startup file ` +
      `(${basename(shell) === 'bash' ? "bash reads ~/.bashrc for a command over ssh, and what it sources" : `${shell}'s startup files`}); ` +
      `under sshd then: ${running}. See what the startup files run with \`${shell} -x -i -c true\`, and what waits with ` +
      `\`ps -ef --forest\` while a login (\`ssh localhost ${command}\`) hangs`
    );
  } finally {
    await s.stop();
  }
}
