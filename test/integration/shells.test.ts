import { mkdtempSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync, rmSync } from 'node:fs';
import { homedir } from 'node:os';
import { alive, PROCCTL, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { killMarked, SKIP_SANDBOX } from './sandbox-support.js';
import { findSessionProcesses } from '../../src/runner/sweep.js';

afterAll(stopAllDaemons);

/** The live processes that carry a session's PROCCTL_SESSION_ID. */
function marked(sessionId: string): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/environ`, 'latin1').includes(`PROCCTL_SESSION_ID=${sessionId}\0`) && state(Number(entry)) !== 'Z') found.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return found;
}

/** A process's state letter from /proc (T: stopped), or undefined once it is gone. */
function state(pid: number): string | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return text.slice(text.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return undefined;
  }
}

describe('shells that remember (SPEC §20)', () => {
  it('keeps cd, variables, functions, aliases, set options and a venv from one command to the next', async () => {
    const d = await startDaemon();
    const c = await d.client();
    const work = mkdtempSync(join(tmpdir(), 'procctl-shell-'));
    mkdirSync(join(work, 'api', '.venv', 'bin'), { recursive: true });
    writeFileSync(join(work, 'api', '.venv', 'bin', 'activate'), 'export VIRTUAL_ENV="$PWD/.venv"\ndeactivate() { unset VIRTUAL_ENV; }\n');
    const first = await c.exec({ command: 'cd api && source .venv/bin/activate; export DB=pg; plain=kept; greet() { echo "hi $1"; }; alias ll="echo listed"; set -o pipefail', shell: 'dev', workdir: work });
    expect(first.status).toBe('completed');
    expect(first.exitCode).toBe(0);
    expect(first.output).toBe('');
    expect(first.shell).toEqual({ name: 'dev', cwd: join(work, 'api') });
    const second = await c.exec({ command: 'pwd; echo "$DB $plain $VIRTUAL_ENV"; greet you; ll; false | true; echo "pipefail $?"; type deactivate >/dev/null && echo venv', shell: 'dev' });
    expect(second.status).toBe('completed');
    expect(second.output).toBe(`${join(work, 'api')}\npg kept ${join(work, 'api', '.venv')}\nhi you\nlisted\npipefail 1\nvenv\n`);
    expect(second.sessionId).not.toBe(first.sessionId);
    const listed = await c.call('shell.list', {});
    expect(listed.shells).toHaveLength(1);
    expect(listed.shells[0]).toMatchObject({ name: 'dev', cwd: join(work, 'api'), state: 'idle', commands: 2 });
    // Each command's row names its shell (the console puts it under the shell); a plain exec's does not.
    const plain = await c.exec({ command: 'true' });
    const rows = (await c.process({ action: 'list' })).sessions;
    expect(rows.find((r: { sessionId: string }) => r.sessionId === second.sessionId).shell).toEqual({ name: 'dev' });
    expect(rows.find((r: { sessionId: string }) => r.sessionId === plain.sessionId).shell).toBeUndefined();
    c.close();
    await d.stop();
  });

  it('gives each command exactly its own output and exit code, whatever it prints', async () => {
    const d = await startDaemon();
    const c = await d.client();
    const fake = 'printf "ready 0 /\\0"; printf "x 0 /tmp\\0"; echo "__procctl_id=x"; echo done';
    const r = await c.exec({ command: fake, shell: 's' });
    expect(r.status).toBe('completed');
    expect(r.output).toBe('ready 0 /\u0000x 0 /tmp\u0000__procctl_id=x\ndone\n');
    // Much output, on both streams, right up to the end: every byte belongs to this command.
    const many = await c.exec({ command: 'seq 1 20000; seq 1 3 >&2; exit 3', shell: 's' });
    expect(many.exitCode).toBe(3);
    expect(many.status).toBe('completed');
    const lines = many.output.split('\n');
    expect(lines.filter((l: string) => l === '20000')).toHaveLength(1);
    expect(many.output.length).toBeGreaterThan(100_000);
    // `exit 3` ended that shell; the next command is told, and runs in a fresh one.
    const next = await c.exec({ command: 'echo again; (exit 42)', shell: 's' });
    expect(next.output).toBe('again\n');
    expect(next.exitCode).toBe(42);
    expect(next.shell.restarted).toBe(true);
    const after = await c.exec({ command: 'echo $((6*7))', shell: 's' });
    expect(after.output).toBe('42\n');
    expect(after.shell.restarted).toBeUndefined();
    c.close();
    await d.stop();
  });

  it('runs one command at a time, and a kill ends the command and its children but keeps the shell', async () => {
    const d = await startDaemon();
    const c = await d.client();
    await c.exec({ command: 'cd /tmp; KEEP=yes', shell: 'k' });
    const r = await c.exec({ command: 'sleep 300 & sleep 301 & echo $! > /dev/null; echo started; sleep 302; echo never', shell: 'k', yieldMs: 500 });
    expect(r.status).toBe('running');
    await waitFor(async () => (await c.process({ action: 'poll', sessionId: r.sessionId })).output !== undefined, { what: 'started' });
    const busy = await c.call('exec', { command: 'echo no', shell: 'k' }).catch((e: Error) => e);
    expect(String((busy as Error).message)).toContain(r.sessionId);
    expect(String((busy as Error).message)).toContain('process kill');
    // Its children carry its id (PROCCTL_SESSION_ID), the background ones too.
    const kids = await waitFor(() => {
      // The command's own processes (its session's marker), the three sleeps among them.
      const mine = (findSessionProcesses(new Set([r.sessionId])).get(r.sessionId) ?? []).map((p) => p.pid);
      const sleeps = mine.filter((pid) => /^sleep 30[012]$/.test(readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' ').trim()));
      return sleeps.length === 3 ? sleeps : undefined;
    }, { what: 'the three children' });
    const killed = await c.process({ action: 'kill', sessionId: r.sessionId });
    expect(killed.status).toBe('failed');
    expect(killed.reason).toBe('user');
    await waitFor(() => kids.every((pid) => !alive(pid)), { what: 'the children gone' });
    const shells = (await c.call('shell.list', {})).shells;
    expect(shells[0].state).toBe('idle');
    expect(alive(shells[0].pid)).toBe(true);
    const again = await c.exec({ command: 'echo "$KEEP $PWD"', shell: 'k' });
    expect(again.output).toBe('yes /tmp\n');
    expect(again.shell.restarted).toBeUndefined();
    c.close();
    await d.stop();
  });

  it('times a command out, waits for its output, and interrupts a builtin loop, keeping the shell', async () => {
    const d = await startDaemon();
    const c = await d.client();
    await c.exec({ command: 'N=7', shell: 't' });
    const slow = await c.exec({ command: 'sleep 100', shell: 't', timeout: 1 });
    expect(slow.status).toBe('failed');
    expect(slow.reason).toBe('timeout');
    const ready = await c.exec({ command: 'echo listening; sleep 100', shell: 't', waitFor: { output: 'listening' }, yieldMs: 20_000 });
    expect(ready.status).toBe('running');
    expect(ready.ready).toBe(true);
    await c.process({ action: 'kill', sessionId: ready.sessionId });
    const loop = await c.exec({ command: 'while :; do :; done', shell: 't', yieldMs: 300 });
    expect(loop.status).toBe('running');
    const killed = await c.process({ action: 'kill', sessionId: loop.sessionId });
    expect(killed.status).toBe('failed');
    const after = await c.exec({ command: 'echo $N', shell: 't' });
    expect(after.output).toBe('7\n');
    expect(after.shell.restarted).toBeUndefined();
    c.close();
    await d.stop();
  });

  it('pauses, continues and signals only the command, never the shell or its earlier jobs', async () => {
    const d = await startDaemon();
    const c = await d.client();
    const bg = await c.exec({ command: 'KEEP=yes; sleep 600 & echo $!', shell: 'p' });
    // An interactive bash says "[1] PID" of a background job, as in a terminal; the last line is ours.
    const job = Number(bg.output.trim().split('\n').pop());
    const shellPid = (await c.call('shell.list', {})).shells[0].pid;
    const r = await c.exec({ command: `sh -c 'trap "echo usr1; exit 5" USR1; while :; do sleep 0.2; done'`, shell: 'p', yieldMs: 300 });
    expect(r.status).toBe('running');
    await waitFor(() => marked(r.sessionId).length >= 2, { what: "the command's sh and sleep" });
    const paused = await c.process({ action: 'pause', sessionId: r.sessionId });
    expect(paused.paused).toBe(true);
    await waitFor(() => marked(r.sessionId).every((pid) => state(pid) === 'T'), { what: "the command's processes stopped" });
    expect(state(shellPid)).not.toBe('T');
    expect(state(job)).not.toBe('T');
    const cont = await c.process({ action: 'continue', sessionId: r.sessionId });
    expect(cont.paused).toBeUndefined();
    await waitFor(() => marked(r.sessionId).every((pid) => state(pid) !== 'T'), { what: "the command's processes running again" });
    // SIGUSR1 would end an interactive bash: it reaches the command alone.
    const sent = await c.process({ action: 'signal', sessionId: r.sessionId, signal: 'USR1' });
    expect(sent.text).toContain('process');
    const done = await c.process({ action: 'wait', sessionIds: [r.sessionId], timeout: 20_000 });
    expect(done.sessions[0]).toMatchObject({ status: 'completed', exitCode: 5 });
    // sh says its sleep died of the signal; then its trap ran.
    expect((await c.process({ action: 'log', sessionId: r.sessionId })).output).toMatch(/usr1$/);
    expect(alive(shellPid)).toBe(true);
    expect(alive(job)).toBe(true);
    // A builtin loop runs in the shell itself: pause stops the shell for it, a signal the shell would die of is refused, SIGINT interrupts it.
    const loop = await c.exec({ command: 'while :; do :; done', shell: 'p', yieldMs: 300 });
    expect((await c.process({ action: 'pause', sessionId: loop.sessionId })).paused).toBe(true);
    expect(state(shellPid)).toBe('T');
    await c.process({ action: 'continue', sessionId: loop.sessionId });
    await waitFor(() => state(shellPid) !== 'T', { what: 'the shell running again' });
    const refused = await c.call('process', { action: 'signal', sessionId: loop.sessionId, signal: 'USR1' }).catch((e: Error) => e);
    expect(String((refused as Error).message)).toContain('would end the shell');
    await c.process({ action: 'signal', sessionId: loop.sessionId, signal: 'INT' });
    const stopped = await c.process({ action: 'wait', sessionIds: [loop.sessionId], timeout: 20_000 });
    expect(stopped.sessions[0].status).not.toBe('running');
    const after = await c.exec({ command: 'echo "$KEEP"', shell: 'p' });
    expect(after.output).toBe('yes\n');
    expect(after.shell.restarted).toBeUndefined();
    expect(alive(job)).toBe(true);
    await c.call('shell.close', { name: 'p' });
    await waitFor(() => !alive(job), { what: 'the background job gone with the shell' });
    c.close();
    await d.stop();
  });

  it('takes a checkpoint from inside a command (procctl checkpoint), as its own session\'s', async () => {
    const d = await startDaemon();
    const c = await d.client();
    const procctl = `"${process.execPath}" "${PROCCTL}"`;
    const first = await c.exec({ command: `cd /tmp; ${procctl} checkpoint first --data '{"n":1}' && echo reported`, shell: 'cp' });
    expect(first.status).toBe('completed');
    expect(first.output).toBe('reported\n');
    // The next command has a key of its own: its checkpoint is its session's, not the first's.
    const second = await c.exec({ command: `${procctl} checkpoint second --data '{"n":2}' && echo "$PWD"; sleep 60`, shell: 'cp', yieldMs: 30_000, waitFor: { output: '/tmp' } });
    expect(second.status).toBe('running');
    await waitFor(async () => (await c.process({ action: 'list' })).sessions.find((x: { sessionId: string }) => x.sessionId === second.sessionId)?.checkpoint, { what: 'the checkpoint listed' });
    const sessions = (await c.process({ action: 'list' })).sessions;
    expect(sessions.find((x: { sessionId: string }) => x.sessionId === first.sessionId).checkpoint).toMatchObject({ name: 'first', data: { n: 1 } });
    expect(sessions.find((x: { sessionId: string }) => x.sessionId === second.sessionId).checkpoint).toMatchObject({ name: 'second', data: { n: 2 } });
    await c.process({ action: 'kill', sessionId: second.sessionId });
    c.close();
    await d.stop();
  });

  it('judges each command on its own text: a denied one never reaches the shell, which is as it was', async () => {
    const d = await startDaemon({ config: { approvals: { rules: [{ match: 'forbidden', action: 'deny', reason: 'not here' }] } } });
    const c = await d.client();
    await c.exec({ command: 'cd /tmp; COUNT=1', shell: 'j' });
    const denied = await c.exec({ command: 'COUNT=2; cd /; echo forbidden', shell: 'j' });
    expect(denied.status).toBe('denied');
    const after = await c.exec({ command: 'echo "$COUNT $PWD"', shell: 'j' });
    expect(after.output).toBe('1 /tmp\n');
    expect((await c.call('shell.list', {})).shells[0].commands).toBe(2);
    c.close();
    await d.stop();
  });

  it('reaches the running command with write, refuses other settings (a terminal too), and closes on shell.close', async () => {
    const d = await startDaemon();
    const c = await d.client();
    const work = mkdtempSync(join(tmpdir(), 'procctl-shell-'));
    await c.exec({ command: 'true', shell: 'w', workdir: work, env: { MODE: 'one' } });
    // Blocked reading its stdin (the shell's input FIFO), the command is waiting for input, as any exec's would be.
    const r = await c.exec({ command: 'read line; echo "got $line $MODE"', shell: 'w', yieldMs: 30_000 });
    expect(r.status).toBe('waiting_input');
    await c.process({ action: 'write', sessionId: r.sessionId, data: 'hello\n' });
    const done = await c.process({ action: 'wait', sessionIds: [r.sessionId], timeout: 20_000 });
    expect(done.sessions[0].status).toBe('completed');
    expect((await c.process({ action: 'log', sessionId: r.sessionId })).output).toBe('got hello one');
    const other = await c.call('exec', { command: 'true', shell: 'w', env: { MODE: 'two' } }).catch((e: Error) => e);
    expect(String((other as Error).message)).toContain('was made with env {"MODE":"one"}');
    const pty = await c.call('exec', { command: 'true', shell: 'w', pty: true }).catch((e: Error) => e);
    expect(String((pty as Error).message)).toContain('was made with pty false');
    const pid = (await c.call('shell.list', {})).shells[0].pid;
    const closed = await c.call('shell.close', { name: 'w' });
    expect(closed.closed.name).toBe('w');
    await waitFor(() => !alive(pid), { what: 'the shell gone' });
    expect((await c.call('shell.list', {})).shells).toEqual([]);
    const missing = await c.call('shell.close', { name: 'w' }).catch((e: Error) => e);
    expect(String((missing as Error).message)).toContain('no shell "w"');
    c.close();
    await d.stop();
  });
});

describe.skipIf(SKIP_SANDBOX)('a sandboxed shell', () => {
  const base = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), 'procctl-shell-sandbox-'));
  const workspace = join(base, 'workspace');
  mkdirSync(workspace);
  const sessions = new Set<string>();
  afterAll(() => {
    killMarked(sessions);
    rmSync(base, { recursive: true, force: true });
  });

  it("keeps its state in the sandbox and cannot reach the daemon's socket", async () => {
    const d = await startDaemon({ base, config: { sandbox: { mode: 'workspace-write', workspaces: [workspace] } } });
    const c = await d.client();
    const first = await c.exec({ command: 'cd sub 2>/dev/null || { mkdir sub; cd sub; }; export INSIDE=yes', shell: 'box', workdir: workspace });
    sessions.add(first.sessionId);
    expect(first.status).toBe('completed');
    const r = await c.exec({ command: `echo "$INSIDE $PWD"; test -S ${d.socket} && echo socket=reachable || echo socket=hidden; echo x > ${join(base, 'escaped')} 2>/dev/null; echo done`, shell: 'box' });
    sessions.add(r.sessionId);
    expect(r.output).toContain(`yes ${join(workspace, 'sub')}`);
    expect(r.output).toContain('socket=hidden');
    expect(existsSync(join(base, 'escaped'))).toBe(false);
    c.close();
    await d.stop();
  });

  it("takes a command's checkpoint through the shell's channel, as that command's", async () => {
    // procctl's own code is seen inside a sandbox where a network-by-name helper runs from it (a checkout
    // under /tmp is otherwise hidden by the private /tmp): the shell gets network by name for its CLI.
    const d = await startDaemon({ base, config: { sandbox: { mode: 'workspace-write', workspaces: [workspace], network: { allow: ['example.invalid'] } } } });
    const c = await d.client();
    const procctl = `"${process.execPath}" "${PROCCTL}"`;
    const first = await c.exec({ command: `${procctl} checkpoint one --data '{"n":1}' && echo reported`, shell: 'cpbox', workdir: workspace });
    sessions.add(first.sessionId);
    expect(first.output).toBe('reported\n');
    const second = await c.exec({ command: `${procctl} checkpoint two && echo reported`, shell: 'cpbox' });
    sessions.add(second.sessionId);
    expect(second.output).toBe('reported\n');
    const listed = (await c.process({ action: 'list' })).sessions;
    expect(listed.find((x: { sessionId: string }) => x.sessionId === first.sessionId).checkpoint).toMatchObject({ name: 'one', data: { n: 1 } });
    expect(listed.find((x: { sessionId: string }) => x.sessionId === second.sessionId).checkpoint).toMatchObject({ name: 'two' });
    // The channel takes only the running command's: naming another session is refused.
    const other = await c.exec({ command: `PROCCTL_SESSION_ID=${first.sessionId} ${procctl} checkpoint stolen 2>&1; echo "status $?"`, shell: 'cpbox' });
    sessions.add(other.sessionId);
    expect(other.output).toContain('a job reports only its own progress');
    expect(other.output).not.toContain('status 0');
    c.close();
    await d.stop();
  });
});
