import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { cli, cliDaemon, spawnCli, type CliDaemon } from './run.js';

let d: TestDaemon;
let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ d, run, c } = x));

/** Start a backgrounded session and return its id. */
async function start(command: string): Promise<string> {
  return (await c.exec({ command, background: true })).sessionId;
}

/** Wait until `ps --json` shows the session ended. */
async function ended(id: string): Promise<void> {
  await waitFor(async () => (await c.process({ action: 'list' })).sessions.some((s: any) => s.sessionId === id && s.status !== 'running'), {
    what: `session ${id} to end`,
  });
}

describe('procctl sessions', () => {
  it('ps shows a table, newest first', async () => {
    const older = await start('sleep 30');
    const newer = await start('echo done');
    const r = await run(['ps']);
    expect(r.code).toBe(0);
    const lines = r.stdout.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID\s+STATUS\s+PID\s+RUNTIME\s+(CPU\s+MEM\s+)?NAME$/);
    const ids = lines.slice(1).map((l) => l.split(/\s+/)[0]);
    expect(ids.indexOf(newer)).toBeLessThan(ids.indexOf(older));
    expect(lines.find((l) => l.startsWith(older))).toMatch(/running\s+\d+\s+\S+\s+(\S+\s+\S+\s+)?sleep 30$/);
    const json = JSON.parse((await run(['--json', 'ps'])).stdout);
    expect(json.sessions.map((s: any) => s.sessionId)).toContain(older);
  });

  it('poll drains new output and says how the session ended', async () => {
    const id = await start('echo one; echo two; exit 4');
    await ended(id);
    const first = await run(['poll', id]);
    expect(first.stdout).toBe('one\ntwo\n');
    expect(first.stderr).toContain('Process exited with code 4');
    expect(first.code).toBe(1);
    const again = await run(['poll', id, '--wait', '100']);
    expect(again.stdout).toBe('');
  });

  it('poll on a running session exits 0 and waits with --wait', async () => {
    const id = await start('sleep 30');
    const r = await run(['poll', id, '--wait', '50']);
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('still running');
  });

  it('log pages by lines with --offset and --limit', async () => {
    const id = await start('seq 1 10');
    await ended(id);
    expect((await run(['log', id])).stdout).toBe(Array.from({ length: 10 }, (_, i) => `${i + 1}`).join('\n') + '\n');
    expect((await run(['log', id, '--offset', '2', '--limit', '3'])).stdout).toBe('3\n4\n5\n');
    expect((await run(['log', id, '--limit', '2'])).stdout).toBe('9\n10\n');
    expect((await run(['log', id, '--offset', '8'])).stdout).toBe('9\n10\n');
    const json = JSON.parse((await run(['--json', 'log', id, '--offset', '0', '--limit', '1'])).stdout);
    expect(json).toMatchObject({ output: '1', totalLines: 10, offset: 0, lines: 1 });
  });

  it('write feeds stdin and --eof closes it', async () => {
    const id = await start('cat');
    expect((await run(['write', id, 'hello '])).code).toBe(0);
    const piped = await run(['write', id, '-', '--eof'], { input: 'from a pipe\n' });
    expect(piped.code).toBe(0);
    expect(piped.stdout).toContain('closed stdin');
    await ended(id);
    const r = await run(['log', id]);
    expect(r.stdout).toBe('hello from a pipe\n');
    expect((await run(['write', id, 'late'])).code).toBe(1);
  });

  it('write needs data or --eof', async () => {
    expect((await run(['write', 'someid'])).code).toBe(2);
  });

  it('kill stops a running session and reports how it ended', async () => {
    const id = await start('sleep 30');
    const r = await run(['kill', id, '--signal', 'INT', '--grace', '500']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('SIGINT');
    const json = JSON.parse((await run(['--json', 'ps'])).stdout);
    expect(json.sessions.find((s: any) => s.sessionId === id)).toMatchObject({ status: 'failed', reason: 'user' });
  });

  const freezable = process.getuid?.() === 0 && existsSync('/sys/fs/cgroup/unified/cgroup.freeze');
  it(`pause freezes a session (ps says paused), continue lets it run on${freezable ? '' : ' (skipped: needs root and a cgroup2 with cgroup.freeze)'}`, async () => {
    if (!freezable) return;
    const id = await start('while :; do echo tick; sleep 0.05; done');
    const paused = await run(['pause', id]);
    expect(paused.code).toBe(0);
    expect(paused.stdout).toMatch(/is paused: every process of it is frozen\. `procctl continue \S+` lets it run on/);
    expect((await run(['ps'])).stdout.split('\n').find((l) => l.startsWith(id))).toMatch(/^\S+\s+paused\s/);
    const cont = await run(['continue', id]);
    expect(cont.code).toBe(0);
    expect(cont.stdout).toContain('runs on');
    expect((await run(['ps'])).stdout.split('\n').find((l) => l.startsWith(id))).toMatch(/^\S+\s+running\s/);
    expect((await run(['kill', id])).code).toBe(0);
  });

  const v1Memory = process.getuid?.() === 0 && existsSync('/sys/fs/cgroup/memory/cgroup.procs') && existsSync('/sys/fs/cgroup/pids/cgroup.procs');
  it(`exec --memory and --processes set the session's limits; a size that is not one is a usage error${v1Memory ? '' : ' (skipped: needs root and v1 memory and pids hierarchies)'}`, async () => {
    expect((await run(['exec', '--memory', '12X', '--', 'true'])).code).toBe(2);
    if (!v1Memory) return;
    const r = await run(['--json', 'exec', '--bg', '--memory', '64M', '--processes', '10', '--cpu-percent', '50', '--', 'sleep 30']);
    expect(r.code).toBe(0);
    const { sessionId, pid } = JSON.parse(r.stdout);
    const inside = (h: string) => readFileSync(`/proc/${pid}/cgroup`, 'latin1').split('\n').find((l) => l.split(':')[1] === h)!.split(':')[2];
    expect(readFileSync(`/sys/fs/cgroup/memory${inside('memory')}/memory.limit_in_bytes`, 'latin1').trim()).toBe(String(64 * 1024 * 1024));
    expect(readFileSync(`/sys/fs/cgroup/pids${inside('pids')}/pids.max`, 'latin1').trim()).toBe('10');
    expect(readFileSync(`/sys/fs/cgroup/cpu${inside('cpu')}/cpu.cfs_quota_us`, 'latin1').trim()).toBe('50000');
    // procctl status totals what the running sessions use.
    expect((await run(['status'])).stdout).toMatch(/^in use: +\d+ process\(es\) of \d+ running session\(s\), \S+ memory, \S+ CPU so far$/m);
    expect((await run(['kill', sessionId])).code).toBe(0);
  });

  it('clear forgets a finished session and refuses a running one', async () => {
    const done = await start('true');
    await ended(done);
    expect((await run(['clear', done])).code).toBe(0);
    const gone = await run(['log', done]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/^procctl: no session/);
    const running = await start('sleep 30');
    expect((await run(['clear', running])).code).toBe(1);
    await run(['kill', running, '--grace', '200']);
  });

  it('rm kills a running session and forgets it', async () => {
    const id = await start('sleep 30');
    const r = await run(['rm', id]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(`Forgot session ${id}`);
    const json = JSON.parse((await run(['--json', 'ps'])).stdout);
    expect(json.sessions.some((s: any) => s.sessionId === id)).toBe(false);
  });

  it('kill --all stops every running session of the scope', async () => {
    const a = await start('sleep 30');
    const b = await start('sleep 30');
    const r = await run(['--json', 'kill', '--all', '--grace', '500']);
    expect(r.code).toBe(0);
    const ids = JSON.parse(r.stdout).sessions.map((s: any) => s.sessionId);
    expect(ids).toEqual(expect.arrayContaining([a, b]));
  });

  it('keeps scopes apart', async () => {
    const id = await start('true');
    const other = await run(['--scope', 'other', 'log', id]);
    expect(other.code).toBe(1);
    expect(other.stderr).toContain('no session');
  });
});

describe('procctl tool, tools, status', () => {
  it('tool sends a whole tool call and prints its text', async () => {
    const r = await run(['tool', '{"tool":"exec","command":"echo via tool"}']);
    expect(r.code).toBe(0);
    expect(r.stdout).toBe('via tool\n');
    const failed = await run(['--json', 'tool', '-'], { input: '{"tool":"exec","command":"exit 5"}' });
    expect(failed.code).toBe(1);
    expect(JSON.parse(failed.stdout)).toMatchObject({ status: 'completed', exitCode: 5 });
    const list = await run(['tool', '{"tool":"process","action":"list"}']);
    expect(list.code).toBe(0);
    expect(list.stdout).toMatch(/session\(s\)/);
  });

  it('tool refuses JSON that does not parse, and reports the daemon refusing params', async () => {
    expect((await run(['tool', '{nope'])).code).toBe(2);
    const bad = await run(['tool', '{"tool":"process","action":"fly"}']);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('unknown action');
  });

  it('tools lists names and descriptions; --json gives the schemas', async () => {
    const r = await run(['tools']);
    expect(r.stdout).toMatch(/^exec\s+Run a shell command/m);
    expect(r.stdout).toMatch(/^process\s+Manage sessions/m);
    const json = JSON.parse((await run(['--json', 'tools'])).stdout);
    expect(json.map((t: any) => t.name)).toEqual(['exec', 'process']);
    expect(json[0].inputSchema.properties.command).toBeDefined();
  });

  it('status shows the daemon', async () => {
    const r = await run(['status']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^procctld \S+ \(pid \d+\), up /);
    expect(r.stdout).toMatch(/^sandbox: +off \(bubblewrap (works here|cannot run here: .+)\)$/m);
    expect(r.stdout).toMatch(/^env: +\d+ inherited variable\(s\) withheld from sessions$/m);
    expect(JSON.parse((await run(['--json', 'status'])).stdout)).toMatchObject({ socket: d.socket, pid: d.proc.pid });
  });
});

describe('procctl daemon', () => {
  it('runs the daemon in the foreground, like procctld, and stops gracefully on SIGTERM', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-cli-daemon-'));
    const socket = join(dir, 'run', 's.sock');
    try {
      const daemon = spawnCli(['daemon', '--socket', socket, '--log-level', 'warn'], { env: { PROCCTL_STATE_DIR: join(dir, 'state') } });
      await waitFor(async () => (await cli(['--socket', socket, 'status'])).code === 0, { what: 'procctl daemon to answer' });
      const r = await cli(['--socket', socket, 'exec', '--', 'echo via procctl daemon']);
      expect(r.stdout).toBe('via procctl daemon\n');
      daemon.proc.kill('SIGTERM');
      expect((await daemon.exited).code).toBe(0);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
