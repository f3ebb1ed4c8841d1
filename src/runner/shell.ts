import { basename } from 'node:path';
import { isExecutable as executable } from '../base/executable.js';

/**
 * How long the shell found for a `$SHELL` is trusted: older, the next call is answered with it and
 * the file is looked at again once that call's turn is over (two system calls that were on every
 * exec's way to its spawn). A shell installed or removed is seen by the call after.
 */
const RECHECK_MS = 2000;

/** The shell found for each `$SHELL` (a daemon has one), when it was looked for, and whether a look is due. */
const found = new Map<string, { shell: string; at: number; due?: boolean }>();

/**
 * The shell commands run with (SPEC §5): `$SHELL`, but bash for fish (whose syntax agents do
 * not write), and `/bin/sh` when `SHELL` is unset, as under systemd, or not an executable file.
 */
export function resolveShell(env: NodeJS.ProcessEnv, now = Date.now()): string {
  const asked = env.SHELL;
  if (!asked) return '/bin/sh';
  const held = found.get(asked);
  if (held === undefined || now < held.at) return lookFor(asked, now);
  if (now - held.at >= RECHECK_MS && !held.due) {
    held.due = true;
    setImmediate(() => lookFor(asked, Date.now()));
  }
  return held.shell;
}

function lookFor(asked: string, now: number): string {
  const shell = basename(asked) === 'fish' ? (['/bin/bash', '/usr/bin/bash', '/usr/local/bin/bash'].find(executable) ?? '/bin/sh') : executable(asked) ? asked : '/bin/sh';
  found.set(asked, { shell, at: now });
  return shell;
}

/**
 * The arguments before the command. Node connects stdio through socketpairs, and bash reads
 * ~/.bashrc when its stdin is a socket and SHLVL is unset (as under systemd), as if run by sshd:
 * slow and surprising for a job, so bash gets --norc.
 */
export function shellArgs(shell: string, command: string): string[] {
  return basename(shell) === 'bash' ? ['--norc', '-c', command] : ['-c', command];
}
