import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BenchClient } from './client.js';

const SERVER = join(import.meta.dirname, 'bare-rpc.js');

/**
 * A bare server (bare-rpc.ts) answering every request with `result` (with `bySession`, `result`
 * maps session ids to results and a request gets its `params.sessionId`'s), and a client of it;
 * stopped by pid.
 */
export async function bareRpc(result: unknown, bySession = false): Promise<{ client: BenchClient; pid: number; stop: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-bench-bare-'));
  const socket = join(dir, 'bare.sock');
  writeFileSync(join(dir, 'result.json'), JSON.stringify(result));
  const proc = spawn(process.execPath, [SERVER, socket, join(dir, 'result.json'), ...(bySession ? ['--by-session'] : [])], { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = new Promise<void>((r) => proc.once('exit', () => r()));
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await new Promise<void>((resolve, reject) => {
      proc.stdout!.setEncoding('utf8').on('data', (d: string) => d.includes('ready') && resolve());
      proc.once('exit', (code) => reject(new Error(`the bare server exited with ${code} before it listened`)));
    });
    return { client: await BenchClient.connect(socket), pid: proc.pid!, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
