import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import type { TestClient } from './rpc.js';

/** What `daemon.diagnostics` answers (src/daemon/diagnostics.ts). */
export interface Diagnostics {
  rss: number;
  heapUsed: number;
  fds: number;
  resources: Record<string, number>;
  objects: { Session: number; SessionOutput: number; Spool: number; Socket: number };
}

export const diagnose = (c: TestClient): Promise<Diagnostics> => c.call('daemon.diagnostics', { objects: true });

/** Run `fn(i)` for i in [0, n), at most `concurrency` at a time; the first failure fails it all. */
export async function runMany(n: number, concurrency: number, fn: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < n) await fn(next++);
  };
  await Promise.all(Array.from({ length: Math.min(n, concurrency) }, worker));
}

/** Start a command, wait for its end, forget it: one whole session life. Returns its final status. */
export async function execAndClear(c: TestClient, params: Record<string, unknown>): Promise<string> {
  const r = await c.exec({ yieldMs: 60_000, ...params });
  if (r.status === 'running') await c.process({ action: 'kill', sessionId: r.sessionId });
  await c.process({ action: 'clear', sessionId: r.sessionId });
  return r.status;
}

function entries(d: string): string[] {
  try {
    return readdirSync(d).map((f) => join(d, f));
  } catch {
    return [];
  }
}

/** Session records and spools in the state directory of a daemon from startDaemon(). */
export const stateFiles = (dir: string): string[] => entries(join(dir, 'state', 'sessions'));

/** Scratch directories (PROCCTL_TMPDIR) of a daemon from startDaemon(): a few are kept spare. */
export const scratchDirs = (dir: string): string[] => entries(join(dir, 'run', 'procctl.sock.d', 'sessions'));
