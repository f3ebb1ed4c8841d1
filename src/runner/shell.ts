import { basename } from 'node:path';
import { isExecutable as executable } from '../base/executable.js';

/**
 * The shell commands run with (SPEC §5): `$SHELL`, but bash for fish (whose syntax agents do
 * not write), and `/bin/sh` when `SHELL` is unset, as under systemd.
 */
export function resolveShell(env: NodeJS.ProcessEnv): string {
  const shell = env.SHELL;
  if (!shell) return '/bin/sh';
  if (basename(shell) === 'fish') {
    return ['/bin/bash', '/usr/bin/bash', '/usr/local/bin/bash'].find(executable) ?? '/bin/sh';
  }
  return executable(shell) ? shell : '/bin/sh';
}

/**
 * The arguments before the command. Node connects stdio through socketpairs, and bash reads
 * ~/.bashrc when its stdin is a socket and SHLVL is unset (as under systemd), as if run by sshd:
 * slow and surprising for a job, so bash gets --norc.
 */
export function shellArgs(shell: string, command: string): string[] {
  return basename(shell) === 'bash' ? ['--norc', '-c', command] : ['-c', command];
}
