import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { alive, PROCCTL, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { Scoped } from '../helpers/session.js';

/**
 * The CLI's retry when a call is refused `restarting` (SPEC §19): nothing was done, so it is sent
 * again to the new image. `procctl write ID -` feeds a session from its own stdin, which cannot be
 * read twice: the chunk refused is the one sent again, not the whole command.
 */

const pids = new Set<number>();

afterEach(async () => {
  for (const pid of pids) if (alive(pid)) process.kill(pid, 'SIGKILL');
  await stopAllDaemons();
  killLeftovers(pids);
});

describe('the CLI sends again what a restart refused', () => {
  it('write - : a chunk of stdin refused as restarting reaches the session once, in order, through the new image', async () => {
    // The hand-over is held at its settle step (new work refused) for 3 s, then goes on.
    const d = await startDaemon({ env: { PROCCTL_FAULT_HANDOVER: 'hold-settle', PROCCTL_FAULT_HANDOVER_HOLD_MS: '3000' } });
    const s = new Scoped(await d.client(), 'default');
    const cat = await s.exec({ command: 'cat', background: true });
    pids.add(cat.pid);

    const env: NodeJS.ProcessEnv = { ...process.env, PROCCTL_SOCKET: d.socket };
    for (const name of ['PROCCTL_SCOPE', 'PROCCTL_TOKEN', 'PROCCTL_SESSION_ID', 'PROCCTL_HOST']) delete env[name];
    const cli = spawn(process.execPath, [PROCCTL, 'write', cat.sessionId, '-'], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    pids.add(cli.pid!);
    let stdout = '';
    let stderr = '';
    cli.stdout.setEncoding('utf8').on('data', (t: string) => (stdout += t));
    cli.stderr.setEncoding('utf8').on('data', (t: string) => (stderr += t));
    const exited = new Promise<number | null>((r) => cli.on('close', r));
    cli.stdin.write('one\n');
    await s.waitOutput(cat.sessionId, 'one');

    const other = await TestClient.connect(d.socket);
    const c = await TestClient.connect(d.socket);
    const asked = c.request('daemon.restart', { scope: '*', approverToken: readFileSync(`${d.socket}.approver`, 'utf8').trim() });
    // Probed with a session that does not exist: refused as not_found until the hand-over begins.
    await waitFor(async () => (await other.request('process', { action: 'write', sessionId: 'nosuch', data: 'x' })).error?.data?.kind === 'restarting', {
      what: 'the hand-over to refuse changes',
      timeoutMs: 30_000,
    });
    // Sent on the CLI's connection while the hand-over is held: refused, then sent again.
    cli.stdin.write('two\n');
    expect((await asked).result?.sessions).toBe(1);
    other.close();
    c.close();
    const s2 = new Scoped(await d.client(), 'default');
    await s2.waitOutput(cat.sessionId, 'two', 30_000);
    cli.stdin.end('three\n');
    expect(await exited, stderr).toBe(0);
    expect(stdout).toBe(`Wrote 14 bytes of session ${cat.sessionId}.\n`);
    // It was refused, and said it waited.
    expect(stderr).toContain('the daemon is restarting; the input waits for it');
    await s2.waitOutput(cat.sessionId, 'three');
    expect((await s2.log(cat.sessionId, { offset: 0 })).output).toBe('one\ntwo\nthree');
  }, 120_000);
});
