import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchClient } from './client.js';

/** A bare server and a client of it; stopped by pid. */
export interface Bare {
  client: BenchClient;
  pid: number;
  stop: () => Promise<void>;
}

/**
 * A bare server (bare-rpc.ts) answering every request with `result` (with `bySession`, `result`
 * maps session ids to results and a request gets its `params.sessionId`'s).
 */
export function bareRpc(result: unknown, bySession = false): Promise<Bare> {
  return bareServer('bare-rpc.js', result, bySession ? ['--by-session'] : []);
}

/**
 * A bare exec server (bare-exec.ts) running each request's command with `shell` and `args`
 * through procctl's spawner, with `env`, and answering with `result` once it ended.
 */
export function bareExec(result: unknown, shell: string, args: string[], env: NodeJS.ProcessEnv): Promise<Bare> {
  return bareServer('bare-exec.js', result, [shell, ...args], env);
}

async function bareServer(script: string, result: unknown, extra: string[], env?: NodeJS.ProcessEnv): Promise<Bare> {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-bench-bare-'));
  const socket = join(dir, 'bare.sock');
  writeFileSync(join(dir, 'result.json'), JSON.stringify(result));
  const proc = spawn(process.execPath, [join(import.meta.dirname, script), socket, join(dir, 'result.json'), ...extra], { stdio: ['ignore', 'pipe', 'inherit'], ...(env ? { env } : {}) });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  let client: BenchClient | undefined;
  // The server closes once its connections have: its client's first.
  const stop = async () => {
    client?.close();
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      proc.stdout!.setEncoding('utf8').on('data', (d: string) => d.includes('ready') && resolve());
      proc.once('exit', (code) => reject(new Error(`the bare server exited with ${code} before it listened`)));
    });
    client = await BenchClient.connect(socket);
    return { client, pid: proc.pid!, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
