import pty, { type IPty } from '@lydell/node-pty';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, PROCCTL, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers, leftovers, waitGone } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes, sharedDaemon } from '../helpers/session.js';
import { guardianOf, makeStateDir, markedProcesses, removeStateDirs } from '../helpers/state.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

// Every guarantee of the contract, for a session inside the sandbox (SPEC §12): the group stop
// with its grace and SIGKILL, escapees, the stop file, timeouts, waiting-for-input detection, a
// terminal (send-keys, attach), and the guardian after a daemon SIGKILL.
const fs = scratchRoot('procctl-sbxg-');
const SANDBOX = { sandbox: { mode: 'workspace-write', workspaces: [fs.root] } };

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;
const ids = new Set<string>();

const pgrpOf = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
};
/** After its trap set n=0, the job counts on for a while: it outlived the signal by far. */
const COUNT_AFTER_TRAP = 'echo ready; while :; do if [ -n "$n" ]; then n=$((n+1)); echo still-running-$n; fi; sleep 0.1; done';
/** Host pids of a session's processes (inside the sandbox they have other numbers). */
const processesOf = (id: string) => markedProcesses([id]).map((m) => m.pid);

describe.skipIf(SKIP_SANDBOX)('guarantees under the sandbox', () => {
  sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' }, config: SANDBOX }, (x) => ({ d, c, scopes } = x));
  afterAll(() => killMarked(ids));

  const bg = async (s: Scoped, command: string, extra: Record<string, unknown> = {}) => {
    const r = await s.exec({ command, background: true, ...extra });
    expect(r.status, r.text).toBe('running');
    scopes.track(r.pid);
    ids.add(r.sessionId);
    return r;
  };

  it('kill: the stop file is readable inside, the job gets the stop signal and its grace, then the group is gone', async () => {
    const s = scopes.next('grace');
    const r = await bg(s, `trap 'cat "$PROCCTL_STOP_FILE"; sleep 0.2; echo cleaned-up; exit 5' TERM; echo ready; sleep 600 & wait`);
    await s.waitOutput(r.sessionId, 'ready');
    const inside = processesOf(r.sessionId);
    expect(inside.length).toBeGreaterThanOrEqual(3); // bwrap, its init, the shell, sleep
    const k = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 15_000, reason: 'sandboxed stop' });
    expect(k).toMatchObject({ status: 'failed', reason: 'user', exitCode: 5 });
    expect(k.stop).toMatchObject({ graceful: true });
    const out = (await s.log(r.sessionId, { offset: 0 })).output;
    expect(out).toContain('"reason":"sandboxed stop"');
    expect(out).toContain('cleaned-up');
    expect(leftovers(inside)).toEqual([]);
  });

  it('kill: a job that ignores SIGTERM is SIGKILLed after the grace, namespace and all', async () => {
    const s = scopes.next('deaf');
    const r = await bg(s, `trap '' TERM; echo ready; sleep 600`);
    await s.waitOutput(r.sessionId, 'ready');
    const inside = processesOf(r.sessionId);
    const k = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 300 });
    expect(k).toMatchObject({ status: 'failed', reason: 'user', signal: 'SIGKILL' });
    expect(k.stop).toMatchObject({ graceful: false });
    // Out of the session's cgroup by the answer; a process SIGKILLed a moment before may still be on
    // its way out of the kernel (past its cgroup, not yet a zombie) on a loaded machine: briefly.
    expect(await waitGone(inside, 5000)).toEqual([]);
    expect(processesOf(r.sessionId)).toEqual([]);
  });

  it('kill: a process that left the group (setsid) inside the sandbox is stopped too', async () => {
    const s = scopes.next('escapee');
    const r = await bg(s, 'setsid sleep 600 >/dev/null 2>&1 & echo ready; sleep 600');
    await s.waitOutput(r.sessionId, 'ready');
    await waitFor(() => processesOf(r.sessionId).some((p) => alive(p) && pgrpOf(p) !== r.pid), { what: 'the escapee to leave the group' });
    await s.process({ action: 'kill', sessionId: r.sessionId });
    await waitFor(() => processesOf(r.sessionId).length === 0, { what: 'every process of the session to be gone' });
  });

  it('after the shell exits by itself, leftovers in the group and escapees get the stop signal and its grace, not a bare SIGKILL', async () => {
    const s = scopes.next('leftovers');
    const work = fs.dir('leftovers');
    const r = await bg(
      s,
      [
        `sh -c 'trap "echo leftover-got-TERM >> leftover.log; exit 0" TERM; sleep 600 & wait' &`,
        `setsid sh -c 'trap "echo escapee-got-TERM >> escapee.log; exit 0" TERM; sleep 600 & wait' &`,
        'sleep 0.5; echo leader-done',
      ].join('\n'),
      { workdir: work },
    );
    const ended = await s.waitEnded(r.sessionId);
    expect(ended).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(readFileSync(join(work, 'leftover.log'), 'utf8')).toBe('leftover-got-TERM\n');
    expect(readFileSync(join(work, 'escapee.log'), 'utf8')).toBe('escapee-got-TERM\n');
    expect(processesOf(r.sessionId)).toEqual([]);
  });

  it('a timeout stops the sandboxed group', async () => {
    const s = scopes.next('timeout');
    const r = await s.exec({ command: 'sleep 600', timeout: 1, yieldMs: 30_000 });
    scopes.track(r.pid);
    expect(r).toMatchObject({ status: 'failed', reason: 'timeout' });
    expect(processesOf(r.sessionId)).toEqual([]);
  });

  it('a job killed by a signal reads as that signal, as outside the sandbox', async () => {
    const r = await scopes.next('signal').exec({ command: 'kill -SEGV $$', yieldMs: 30_000 });
    expect(r).toMatchObject({ status: 'failed', signal: 'SIGSEGV', reason: 'signal', exitCode: null });
  });

  it('waiting-for-input is detected on pipes, and resume answers it', async () => {
    const s = scopes.next('input');
    const r = await s.exec({ command: "read -p 'Continue? ' a; echo got=$a", yieldMs: 30_000 });
    scopes.track(r.pid);
    expect(r.status, r.text).toBe('waiting_input');
    await s.process({ action: 'resume', sessionId: r.sessionId, input: { text: 'yes' } });
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(output).toContain('got=yes');
  });

  it('a pty: a 120x30 terminal, a prompt found on it, send-keys C-c interrupts', async () => {
    const s = scopes.next('pty');
    const r = await s.exec({ command: "test -t 0 && echo tty=yes; stty size; read -p 'Proceed? [y/N] ' a; echo got=$a; sleep 600", pty: true, yieldMs: 30_000 });
    scopes.track(r.pid);
    ids.add(r.sessionId);
    expect(r.status, r.text).toBe('waiting_input');
    expect(r.interrupt.kind).toBe('confirm');
    expect(r.tail).toContain('tty=yes');
    expect(r.tail).toContain('30 120');
    await s.process({ action: 'resume', sessionId: r.sessionId, input: { confirm: true } });
    await s.waitOutput(r.sessionId, 'got=y');
    await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['C-c'] });
    const { last } = await s.pollUntilEnded(r.sessionId);
    expect(last).toMatchObject({ status: 'failed', signal: 'SIGINT', reason: 'signal' });
    expect(processesOf(r.sessionId)).toEqual([]);
  });

  it('on a pty, C-c goes to the job, not to the sandbox: a job that catches it runs on', async () => {
    const s = scopes.next('pty-trap');
    const r = await bg(s, `trap 'echo caught-INT; n=0' INT; ${COUNT_AFTER_TRAP}`, { pty: true });
    await s.waitOutput(r.sessionId, 'ready');
    await s.process({ action: 'send-keys', sessionId: r.sessionId, keys: ['C-c'] });
    await s.waitOutput(r.sessionId, 'caught-INT');
    await s.waitOutput(r.sessionId, 'still-running-5');
    const [listed] = await s.list();
    expect(listed).toMatchObject({ sessionId: r.sessionId, status: 'running' });
    await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 300 });
  });

  it('on pipes, process signal goes to the job, not to the sandbox: SIGUSR1 caught, the session runs on', async () => {
    const s = scopes.next('usr1');
    const r = await bg(s, `trap 'echo caught-USR1; n=0' USR1; ${COUNT_AFTER_TRAP}`);
    await s.waitOutput(r.sessionId, 'ready');
    await s.process({ action: 'signal', sessionId: r.sessionId, signal: 'SIGUSR1' });
    await s.waitOutput(r.sessionId, 'caught-USR1');
    await s.waitOutput(r.sessionId, 'still-running-5');
    const [listed] = await s.list();
    expect(listed).toMatchObject({ sessionId: r.sessionId, status: 'running' });
    await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 300 });
  });

  describe('procctl attach', () => {
    const terminals = new Set<IPty>();
    afterEach(() => {
      for (const t of terminals) {
        try {
          process.kill(t.pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
    });

    it('types into a sandboxed terminal session and shows its output', async () => {
      const s = scopes.next('attach');
      const r = await bg(s, 'echo attached-ok; cat', { pty: true });
      await s.waitOutput(r.sessionId, 'attached-ok');
      const env: Record<string, string> = {};
      for (const [k, v] of Object.entries(process.env)) if (v !== undefined && !k.startsWith('PROCCTL_')) env[k] = v;
      const t = pty.spawn(process.execPath, [PROCCTL, '--socket', d.socket, '--scope', s.scope, 'attach', r.sessionId], { cols: 100, rows: 30, env });
      terminals.add(t);
      let screen = '';
      t.onData((data) => (screen += data));
      const exited = new Promise<number>((resolve) => t.onExit(({ exitCode }) => resolve(exitCode)));
      await waitFor(() => screen.includes('press Ctrl-] to detach'), { what: 'attach to start' });
      const before = screen.length;
      t.write('typed-in\r');
      await waitFor(() => /typed-in\r*\n[^]*typed-in/.test(screen.slice(before)), { what: 'cat to echo what was typed' });
      t.write('\x1d');
      expect(await exited).toBe(0);
      await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 200 });
    });
  });
});

describe.skipIf(SKIP_SANDBOX)('the guardian under the sandbox', () => {
  afterAll(async () => {
    await stopAllDaemons();
    removeStateDirs();
    fs.cleanup();
  });

  it('after a SIGKILL of the daemon, nothing of a sandboxed session is left: group, namespace or escapee', async () => {
    const d1 = await startDaemon({ env: { PROCCTL_STATE_DIR: makeStateDir() }, config: SANDBOX });
    const s = new Scoped(await d1.client(), 'crash');
    const runs = [];
    for (const command of ['sleep 600', 'setsid sleep 600 >/dev/null 2>&1 & echo ready; sleep 600', "trap '' TERM; sleep 600 & echo ready; wait"]) {
      const r = await s.exec({ command, background: true });
      runs.push(r);
      ids.add(r.sessionId);
    }
    await waitFor(() => markedProcesses(runs.map((r) => r.sessionId)).length >= 9, { what: 'every sandboxed process to run' });
    const before = markedProcesses(runs.map((r) => r.sessionId)).map((m) => m.pid);
    const guardian = guardianOf(d1.proc.pid!);
    expect(guardian).toBeDefined();
    d1.proc.kill('SIGKILL');
    await waitFor(() => markedProcesses(runs.map((r) => r.sessionId)).length === 0 && leftovers(before).length === 0, {
      timeoutMs: 10_000,
      what: 'every sandboxed process to be gone after the daemon was SIGKILLed',
    }).catch(() => undefined);
    const left = [...new Set([...leftovers(before), ...markedProcesses(runs.map((r) => r.sessionId)).map((m) => m.pid)])];
    killLeftovers(left);
    expect(left).toEqual([]);
  });
});
