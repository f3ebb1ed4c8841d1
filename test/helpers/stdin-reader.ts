import { spawn, type ChildProcess } from 'node:child_process';
import { fdTarget } from '../../src/runner/procfs.js';

/** Real processes in their own groups, each run by `runInGroup`, killed by group by `killGroups`. */
const started: ChildProcess[] = [];

/** Run `script` under bash in a process group of its own, its stdin a pipe: its pid, and what its fd 0 is (`pipe:[…]`). */
export function runInGroup(script: string): { pid: number; stdinId: string } {
  const p = spawn('/bin/bash', ['--norc', '-c', script], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  started.push(p);
  const stdinId = fdTarget(p.pid!, 0);
  if (!stdinId) throw new Error(`no fd 0 for ${p.pid}`);
  return { pid: p.pid!, stdinId };
}

/** SIGKILL the group of every process runInGroup started (for afterAll). */
export function killGroups(): void {
  for (const p of started.splice(0)) {
    try {
      process.kill(-p.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
}
