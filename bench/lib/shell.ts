import { spawn } from 'node:child_process';
import { resolveShell, shellArgs } from '../../src/runner/shell.js';
import { now } from './stats.js';

/** The shell and arguments the daemon will use for `command` under this environment. */
export function daemonShell(env: NodeJS.ProcessEnv, command: string): { shell: string; args: string[] } {
  const shell = resolveShell(env);
  return { shell, args: shellArgs(shell, command) };
}

export interface ShellRun {
  ms: number;
  /** Bytes read from stdout + stderr (0 when they were not piped). */
  bytes: number;
  code: number | null;
}

/**
 * Run a command in-process the way the daemon spawns one (own process group, stdio on pipes),
 * read and discard its output, and resolve when the process has exited and its pipes closed.
 */
export function runLikeDaemon(env: NodeJS.ProcessEnv, command: string, stdio: 'pipe' | 'ignore' = 'pipe'): Promise<ShellRun> {
  const { shell, args } = daemonShell(env, command);
  return new Promise((resolve, reject) => {
    const t0 = now();
    const child = spawn(shell, args, { env, detached: true, stdio: stdio === 'pipe' ? ['pipe', 'pipe', 'pipe'] : ['ignore', 'ignore', 'ignore'] });
    let bytes = 0;
    child.stdout?.on('data', (b: Buffer) => (bytes += b.length));
    child.stderr?.on('data', (b: Buffer) => (bytes += b.length));
    child.once('error', reject);
    child.once('close', (code) => resolve({ ms: now() - t0, bytes, code }));
  });
}
