import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { alive, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { spawnCli, waitForOutput, cliDaemon, type CliDaemon } from './run.js';

let d: TestDaemon;
let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ d, run, c } = x));

/** The session record whose command is `command` (the CLI does not say its id until the end). */
async function sessionOf(command: string): Promise<any> {
  const { sessions } = await c.process({ action: 'list' });
  return sessions.find((s: any) => s.command === command);
}

describe('procctl exec in the foreground', () => {
  it('streams output as it comes, before the command ends', async () => {
    const gate = join(d.dir, 'gate');
    const command = `echo first; while [ ! -e ${gate} ]; do sleep 0.05; done; echo second >&2`;
    const child = spawnCli(['--socket', d.socket, 'exec', '--', command]);
    await waitForOutput(child, 'first\n');
    expect((await sessionOf(command)).status).toBe('running');
    writeFileSync(gate, '');
    const r = await child.exited;
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('first\n');
    expect(r.stderr).toBe('second\n');
  });

  it('forwards its stdin, then end of input', async () => {
    const r = await run(['exec', '--', 'cat; echo done'], { input: 'hello\n' });
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('hello\ndone\n');
  });

  it('gives the command no stdin with --stdin-null', async () => {
    const r = await run(['exec', '--stdin-null', '--', 'wc -c'], { input: 'ignored\n' });
    expect(r.stdout.trim()).toBe('0');
  });

  it('--yield returns while it runs, leaving it running', async () => {
    const r = await run(['exec', '--yield', '300', '--', 'echo started; sleep 30']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('started\n');
    const id = /Session (\S+) is still running/.exec(r.stdout)?.[1];
    expect(id).toBeTruthy();
    expect(r.stderr).toContain(`procctl poll ${id}`);
    expect(r.stderr).toContain(`procctl kill ${id}`);
    const { sessions } = await c.process({ action: 'list' });
    expect(sessions.find((s: any) => s.sessionId === id).status).toBe('running');
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });
});

describe('the signal bridge of foreground exec', () => {
  it('delivers SIGINT to the remote group and waits for its end', async () => {
    const command = 'trap "echo got INT; exit 7" INT; echo ready; sleep 30 & wait';
    const child = spawnCli(['--socket', d.socket, 'exec', '--', command]);
    await waitForOutput(child, 'ready\n');
    const session = await sessionOf(command);
    process.kill(child.proc.pid!, 'SIGINT');
    const r = await child.exited;
    expect(r.stdout).toBe('ready\ngot INT\n');
    expect(r.stderr).toContain('(Command exited with code 7)');
    expect(r.code).toBe(7);
    const { sessions } = await c.process({ action: 'list' });
    expect(sessions.find((s: any) => s.sessionId === session.sessionId)).toMatchObject({ status: 'completed', exitCode: 7 });
    await waitFor(() => !alive(session.pid), { what: 'the remote leader to be gone' });
  });

  it('a command that does not trap SIGTERM ends with it, and procctl exits 143 (128 + 15), as a shell says', async () => {
    const command = 'echo ready; sleep 30';
    const child = spawnCli(['--socket', d.socket, 'exec', '--', command]);
    await waitForOutput(child, 'ready\n');
    process.kill(child.proc.pid!, 'SIGTERM');
    const r = await child.exited;
    expect(r.code).toBe(143);
    expect(r.stderr).toMatch(/signal SIGTERM/);
    expect((await sessionOf(command)).status).toBe('failed');
  });
});
