import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir, userInfo } from 'node:os';
import { join } from 'node:path';
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
  sshCommand(key: 'good' | 'stranger' | 'nodaemon' | 'noprocctl'): string;
  /** What sshd printed (with -e), for a failing test's message. */
  log: () => string;
  stop(): Promise<void>;
}

/**
 * A real sshd on 127.0.0.1 at a free port, with its own host key and config in a temp dir, in
 * the foreground (`-D -e -f CONFIG`). Keys, each with a forced command as docs/remote.md shows:
 * `good` reaches the daemon at `socket`; `nodaemon` reaches a socket nobody listens on;
 * `noprocctl` forces a procctl that is not there; `stranger` is not authorized at all.
 */
export async function startSshd(sshd: string, socket: string): Promise<TestSshd> {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-sshd-'));
  const port = await freePort();
  const user = userInfo().username;
  const hostKey = keypair(dir, 'host_key');
  const keys = { good: keypair(dir, 'good'), stranger: keypair(dir, 'stranger'), nodaemon: keypair(dir, 'nodaemon'), noprocctl: keypair(dir, 'noprocctl') };
  const dial = `${process.execPath} ${PROCCTL} dial-stdio`;
  writeFileSync(
    join(dir, 'authorized_keys'),
    [
      `command="${dial}",environment="PROCCTL_SOCKET=${socket}",restrict ${keys.good.pub}`,
      `command="${dial}",environment="PROCCTL_SOCKET=${join(dir, 'nobody.sock')}",restrict ${keys.nodaemon.pub}`,
      `command="${join(dir, 'not-installed', 'procctl')} dial-stdio",restrict ${keys.noprocctl.pub}`,
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
