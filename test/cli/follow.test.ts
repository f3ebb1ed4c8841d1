import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { spawnCli, waitForOutput, cliDaemon, type CliDaemon } from './run.js';

let d: TestDaemon;
let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ d, run, c } = x));

async function start(command: string, scope?: string): Promise<string> {
  return (await c.exec({ command, background: true, ...(scope ? { scope } : {}) })).sessionId;
}

/** The retained output of a session, read directly. */
async function logOf(id: string): Promise<any> {
  return c.process({ action: 'log', sessionId: id });
}

describe('procctl log -f', () => {
  it('prints the log so far, then new output, and ends with the session', async () => {
    // The job prints, then waits for its stdin to close before printing the rest.
    const id = await start('echo first; cat >/dev/null; echo second; echo third >&2; exit 3');
    await waitFor(async () => (await logOf(id)).output === 'first', { what: 'the first line' });
    const follower = spawnCli(['--socket', d.socket, 'log', id, '-f']);
    await waitForOutput(follower, 'first\n');
    await c.process({ action: 'write', sessionId: id, eof: true });
    const r = await follower.exited;
    expect(r.stdout).toBe('first\nsecond\nthird\n');
    expect(r.stderr).toContain(`[session ${id} completed (3)]`);
    expect(r.code).toBe(1);
  });

  it('returns at once for a session that has already ended', async () => {
    const id = await start('echo only');
    await waitFor(async () => (await logOf(id)).status === 'completed', { what: 'the session to end' });
    const r = await run(['log', id, '-f']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('only\n');
    expect(r.stderr).toContain('completed (exit code 0)');
  });

  it('says that a finished silent session has ended, not that it has no output yet', async () => {
    const id = await start('true');
    await waitFor(async () => (await logOf(id)).status === 'completed', { what: 'the session to end' });
    const r = await run(['log', id, '-f']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('');
    expect(r.stderr).toBe(`(no output; the session has ended)\n[session ${id} completed (exit code 0)]\n`);
  });

  it('streams JSON lines with --json', async () => {
    const id = await start('echo a; cat >/dev/null; echo b');
    await waitFor(async () => (await logOf(id)).output === 'a', { what: 'the first line' });
    const follower = spawnCli(['--socket', d.socket, '--json', 'log', id, '-f']);
    await waitForOutput(follower, '"output":"a"');
    await c.process({ action: 'write', sessionId: id, eof: true });
    const r = await follower.exited;
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    expect(lines[0]).toMatchObject({ sessionId: id, output: 'a' });
    expect(lines.filter((e) => e.type === 'output').map((e) => e.data).join('')).toBe('b\n');
    expect(lines.at(-1)).toMatchObject({ type: 'exited', status: 'completed', exitCode: 0 });
  });

  it('refuses --offset with --limit', async () => {
    expect((await run(['log', 'x', '-f', '--offset', '1', '--limit', '1'])).code).toBe(2);
  });
});

describe('procctl events', () => {
  it('-f streams started, output and exited lines until stopped', async () => {
    const watcher = spawnCli(['--socket', d.socket, 'events', '-f']);
    await waitFor(() => watcher.stderr().includes('watching events'), { what: 'the watcher to subscribe' });
    const id = await start('echo watched; exit 2');
    await waitForOutput(watcher, new RegExp(`${id}\\s+exited`), 'the exited event');
    const lines = watcher.stdout().trimEnd().split('\n').filter((l) => l.includes(id));
    expect(lines[0]).toMatch(new RegExp(`^\\d\\d:\\d\\d:\\d\\d\\.\\d{3}  ${id}\\s+started\\s+echo watched`));
    expect(lines.some((l) => /output\s+stdout "watched\\n"/.test(l))).toBe(true);
    expect(lines.at(-1)).toMatch(/exited\s+completed \(2\) :: Exec completed/);
    process.kill(watcher.proc.pid!, 'SIGTERM');
    await watcher.exited;
  });

  it('--json prints one event object per line', async () => {
    const watcher = spawnCli(['--socket', d.socket, '--json', 'events', '-f']);
    await waitFor(() => watcher.stderr().includes('watching events'), { what: 'the watcher to subscribe' });
    const id = await start('true');
    await waitForOutput(watcher, '"type":"exited"');
    const events = watcher.stdout().trimEnd().split('\n').map((l) => JSON.parse(l)).filter((e) => e.sessionId === id);
    expect(events.map((e) => e.type)).toEqual(['started', 'exited']);
    process.kill(watcher.proc.pid!, 'SIGTERM');
    await watcher.exited;
  });

  it('without -f ends once no session of the scope is running', async () => {
    const idle = await run(['--scope', 'quiet', 'events']);
    expect(idle.code).toBe(0);
    expect(idle.stderr).toContain('no running sessions');
    const id = await start('cat', 'busy');
    const watcher = spawnCli(['--socket', d.socket, '--scope', 'busy', 'events']);
    await waitFor(() => watcher.stderr().includes('watching events'), { what: 'the watcher to subscribe' });
    await c.process({ action: 'write', sessionId: id, eof: true, scope: 'busy' });
    const r = await watcher.exited;
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(new RegExp(`${id}\\s+exited`));
  });
});
