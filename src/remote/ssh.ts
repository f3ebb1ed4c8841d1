import { spawn } from 'node:child_process';
import { findProgram } from '../base/executable.js';
import type { Dial } from '../transport/dial.js';
import { DaemonUnreachableError } from '../transport/unreachable.js';
import { sshFailure } from './failure.js';
import { shellQuote } from '../base/shell-quote.js';
import { parseSshTarget, sshArgv } from './target.js';
import { splitWords } from './words.js';

/** ssh's stderr kept for the error message: the end of it is what says what went wrong. */
const STDERR_KEPT = 16 * 1024;
/** After closing ssh's stdin, how long it has to end the conversation before it gets SIGTERM. */
const CLOSE_GRACE_MS = 2000;

export interface SshOptions {
  env?: NodeJS.ProcessEnv;
  /** The socket on the far side (`--socket` given with `--host`). */
  socket?: string;
  /** The address came from $PROCCTL_HOST, not --host (said in the error). */
  fromEnv?: boolean;
}

/** Where a program of this name would run from, or undefined. */
function findProgramIn(name: string, env: NodeJS.ProcessEnv): string | undefined {
  return findProgram(name, env.PATH ?? '/usr/bin:/bin');
}

/**
 * A transport to the daemon on another host: `$PROCCTL_SSH_COMMAND` (default `ssh`) runs
 * `procctl dial-stdio` there, and its stdin/stdout carry the protocol (Docker's `ssh://` way,
 * with nothing listening on the network). ssh's stderr is kept and quoted if it fails.
 */
export function sshDial(address: string, opts: SshOptions = {}): Dial {
  const env = opts.env ?? process.env;
  return async (sink) => {
    const unusable = (reason: string, hint: string) => new DaemonUnreachableError(address, reason, 'connect', undefined, hint);
    let target;
    try {
      target = parseSshTarget(address);
    } catch (err) {
      throw unusable((err as Error).message, opts.fromEnv ? 'fix $PROCCTL_HOST, or unset it to use the local daemon' : 'fix --host');
    }
    let ssh: string[];
    try {
      ssh = splitWords(env.PROCCTL_SSH_COMMAND?.trim() || 'ssh', env);
    } catch (err) {
      throw unusable(`$PROCCTL_SSH_COMMAND cannot be split into words: ${(err as Error).message}`, 'fix $PROCCTL_SSH_COMMAND');
    }
    if (ssh.length === 0) ssh = ['ssh'];
    if (!findProgramIn(ssh[0], env))
      throw unusable(
        `cannot run "${ssh[0]}": not found${ssh[0].includes('/') ? '' : ' on PATH'}`,
        'install an ssh client (Debian: apt-get install openssh-client), or name one in $PROCCTL_SSH_COMMAND',
      );
    const argv = sshArgv(ssh, target, opts.socket);
    // Ctrl-C at the terminal reaches the whole foreground group: ssh must not die of it, since
    // procctl forwards it to the session over this very connection. ssh keeps a signal that was
    // ignored when it started ignored, and the terminal stays its own for passphrase prompts.
    const child = spawn('/bin/sh', ['-c', 'trap "" INT QUIT; exec "$@"', 'sh', ...argv], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stderr = '';
    let received = 0;
    let closing: NodeJS.Timeout | undefined;
    child.stdout.on('data', (chunk: Buffer) => {
      received += chunk.length;
      sink.data(chunk);
    });
    child.stderr.setEncoding('utf8').on('data', (text: string) => {
      stderr = (stderr + text).slice(-STDERR_KEPT);
    });
    // A write after ssh ended fails with EPIPE; how it ended is reported at 'close'.
    child.stdin.on('error', () => undefined);
    let spawnError: Error | undefined;
    child.on('error', (err) => (spawnError = err));
    child.on('close', (code, signal) => {
      clearTimeout(closing);
      if (spawnError) return sink.end(unusable(`cannot run ssh: ${spawnError.message}`, 'check $PROCCTL_SSH_COMMAND'));
      const byHand = argv.map(shellQuote).join(' ');
      const login = [...(target.port !== undefined ? ['-p', String(target.port)] : []), target.user !== undefined ? `${target.user}@${target.host}` : target.host].map(shellQuote).join(' ');
      sink.end(sshFailure({ where: address, host: target.host, login, code, signal, stderr, received, byHand }));
    });
    return {
      where: address,
      write: (data) => void child.stdin.write(data),
      close: () => {
        if (child.exitCode !== null || child.signalCode !== null || closing) return;
        // End of input lets the far side's dial-stdio half-close, so the daemon finishes cleanly.
        child.stdin.end();
        closing = setTimeout(() => child.kill('SIGTERM'), CLOSE_GRACE_MS);
      },
    };
  };
}
