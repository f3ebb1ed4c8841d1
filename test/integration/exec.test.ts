import { chmodSync, mkdtempSync, realpathSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import { groupMembers, waitGone } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scopes, within } from '../helpers/session.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;
let scratch: string;

beforeAll(async () => {
  d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' } });
  c = await d.client();
  scopes = new Scopes(() => c);
  scratch = mkdtempSync(join(tmpdir(), 'procctl-exec-'));
});

afterAll(async () => {
  try {
    await scopes.finish(d);
  } finally {
    c?.close();
    rmSync(scratch, { recursive: true, force: true });
    await stopAllDaemons();
  }
});

describe('exec: foreground results', () => {
  it('completes with exit code 0 and returns the output', async () => {
    const s = scopes.next('ok');
    const r = await s.exec({ command: 'echo hello; echo world' });
    expect(r.status).toBe('completed');
    expect(r.exitCode).toBe(0);
    expect(r.output).toBe('hello\nworld\n');
    expect(r.text).toContain('hello\nworld');
    expect(r.text).not.toContain('Command exited with code');
    expect(r.truncated).toBe(false);
    expect(r.droppedChars).toBe(0);
    expect(typeof r.durationMs).toBe('number');
    expect(typeof r.sessionId).toBe('string');
  });

  it('completes with a non-zero exit code and says so in text', async () => {
    const s = scopes.next('nz');
    const r = await s.exec({ command: 'echo to-out; echo to-err >&2; exit 3' });
    expect(r.status).toBe('completed');
    expect(r.exitCode).toBe(3);
    expect(r.output).toContain('to-out\n');
    expect(r.output).toContain('to-err\n');
    expect(r.text).toContain('(Command exited with code 3)');
  });

  it('fails with exit 127 and reason for a command that is not found, and derives the name', async () => {
    const s = scopes.next('nf');
    const r = await s.exec({ command: 'procctl-no-such-tool-xyz run build --fast' });
    expect(r.status).toBe('failed');
    expect(r.exitCode).toBe(127);
    expect(r.reason).toBe('command_not_found');
    expect(r.name).toBe('procctl-no-such-tool-xyz run');
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.name).toBe('procctl-no-such-tool-xyz run');
    expect(listed.command).toBe('procctl-no-such-tool-xyz run build --fast');
  });

  it('fails with exit 126 and reason for a file that is not executable', async () => {
    const s = scopes.next('nx');
    const script = join(scratch, 'not-exec.sh');
    writeFileSync(script, '#!/bin/sh\necho should-not-run\n');
    chmodSync(script, 0o644);
    const r = await s.exec({ command: './not-exec.sh', workdir: scratch });
    expect(r.status).toBe('failed');
    expect(r.exitCode).toBe(126);
    expect(r.reason).toBe('not_executable');
    expect(r.output).not.toContain('should-not-run');
  });

  it('uses an explicit name when one is given', async () => {
    const s = scopes.next('nm');
    const r = await s.exec({ command: 'true', name: 'my label' });
    expect(r.name).toBe('my label');
  });

  it('times out: the session fails with reason "timeout" and the process is gone', async () => {
    const s = scopes.next('to');
    const r = await within(s.exec({ command: 'echo $$; exec sleep 30', timeout: 1, yieldMs: 60_000 }), 15_000, 'timeout');
    expect(r.status).toBe('failed');
    expect(r.reason).toBe('timeout');
    const pid = Number(r.output.trim());
    expect(pid).toBeGreaterThan(0);
    expect(alive(pid)).toBe(false);
  });

  it('fails with the signal when the command is killed by one', async () => {
    const s = scopes.next('sig');
    const r = await s.exec({ command: 'echo before; kill -9 $$; echo after' });
    expect(r.status).toBe('failed');
    expect(r.signal).toBe('SIGKILL');
    expect(r.exitCode).toBeNull();
    expect(r.reason).toBe('signal');
    expect(r.output).toContain('before');
    expect(r.output).not.toContain('after');
    expect(r.text).toContain('SIGKILL');
  });

  it('returns running with a tail at the yield, then finishes', async () => {
    const s = scopes.next('yield');
    const gate = join(scratch, `gate-${Date.now()}`);
    const r = await s.exec({ command: `echo started; while [ ! -e '${gate}' ]; do sleep 0.05; done; echo finished`, yieldMs: 2500 });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    expect(typeof r.pid).toBe('number');
    expect(typeof r.startedAt).toBe('string');
    expect(r.tail).toContain('started');
    expect(r.text).toContain(r.sessionId);
    writeFileSync(gate, '');
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(last.exitCode).toBe(0);
    expect(output).toContain('finished');
  });

  it('background:true returns running at once and the session finishes on its own', async () => {
    const s = scopes.next('bg');
    const r = await s.exec({ command: 'read x; echo "got $x"', background: true });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    expect(r.pid).toBeGreaterThan(0);
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'go\n' });
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(output).toBe('got go\n');
  });

  it('applies the timeout to a backgrounded session too', async () => {
    const s = scopes.next('bgto');
    const r = await s.exec({ command: 'sleep 30', background: true, timeout: 1 });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    const ended = await s.waitEnded(r.sessionId, 15_000);
    expect(ended.status).toBe('failed');
    expect(ended.reason).toBe('timeout');
    expect(alive(r.pid)).toBe(false);
  });

  it('a trailing `sleep 600 &` neither keeps the session running nor survives it', async () => {
    const s = scopes.next('amp');
    const started = Date.now();
    const r = await within(s.exec({ command: 'sleep 600 & echo $!; exit 0', yieldMs: 60_000 }), 15_000, 'session end');
    const sleeper = Number(r.output.trim());
    scopes.track(sleeper);
    expect(sleeper).toBeGreaterThan(0);
    expect(r.status).not.toBe('running');
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(alive(sleeper)).toBe(false);
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(groupMembers(listed.pid)).toEqual([]);
  });

  it('a descendant that left the process group does not outlive the session either', async () => {
    const s = scopes.next('esc');
    const r = await within(s.exec({ command: 'setsid sleep 600 & echo $!; exit 0', yieldMs: 60_000 }), 15_000, 'session end');
    const escaped = Number(r.output.trim());
    scopes.track(escaped);
    expect(escaped).toBeGreaterThan(0);
    expect(r.status).not.toBe('running');
    // Swept shortly after the session ends (it is outside the group, so not part of the end itself).
    expect(await waitGone([escaped], 5000)).toEqual([]);
  });
});

describe('exec: thread keys', () => {
  it('ifRunning "replace" (the default) stops the running session of the key before starting the new one', async () => {
    const s = scopes.next('key');
    const first = await s.exec({ command: 'sleep 600 & wait', key: 'build', background: true });
    scopes.track(first.pid);
    const second = await s.exec({ command: 'echo second', key: 'build' });
    expect(second.status).toBe('completed');
    expect(second.sessionId).not.toBe(first.sessionId);
    const old = (await s.list()).find((x) => x.sessionId === first.sessionId);
    expect(old.status).toBe('failed');
    expect(old.reason).toBe('replaced');
    expect(groupMembers(first.pid)).toEqual([]);
  });

  it('ifRunning "reject" refuses as conflict and "keep" returns the running session', async () => {
    const s = scopes.next('key2');
    const first = await s.exec({ command: 'sleep 600', key: 'k', background: true });
    scopes.track(first.pid);
    const e = await s.error('exec', { command: 'echo no', key: 'k', ifRunning: 'reject' });
    expect(e.data.kind).toBe('conflict');
    const kept = await s.exec({ command: 'echo no', key: 'k', ifRunning: 'keep' });
    expect(kept.sessionId).toBe(first.sessionId);
    expect(kept.status).toBe('running');
    expect((await s.list()).map((x) => x.sessionId)).toEqual([first.sessionId]);
    const other = await s.exec({ command: 'echo other-key', key: 'other' });
    expect(other.status).toBe('completed');
    await s.process({ action: 'kill', sessionId: first.sessionId });
  });
});

describe('exec: parameters', () => {
  it('clamps yieldMs below 10 ms instead of refusing it (SPEC §5)', async () => {
    const s = scopes.next('clamp');
    for (const yieldMs of [0, -5]) {
      const r = await s.exec({ command: 'sleep 2', yieldMs });
      expect(r.status, `yieldMs ${yieldMs}`).toBe('running');
      await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 0 });
    }
  });

  it('refuses a workdir that does not exist as invalid', async () => {
    const s = scopes.next('wd');
    const e = await s.error('exec', { command: 'true', workdir: join(scratch, 'no', 'such', 'dir') });
    expect(e.data.kind).toBe('invalid');
    expect(e.data.path).toEqual(['workdir']);
    const file = join(scratch, 'a-file');
    writeFileSync(file, '');
    const e2 = await s.error('exec', { command: 'true', workdir: file });
    expect(e2.data.kind).toBe('invalid');
    expect(await s.list()).toEqual([]);
  });

  it('runs in the given workdir', async () => {
    const s = scopes.next('wd2');
    const r = await s.exec({ command: 'pwd', workdir: scratch });
    expect(r.output.trim()).toBe(scratch);
  });

  it.each([['PATH'], ['LD_PRELOAD'], ['LD_LIBRARY_PATH'], ['DYLD_INSERT_LIBRARIES'], ['NODE_OPTIONS'], ['BASH_FUNC_x'], ['BASH_FUNC_x%%'], ['1BAD'], ['A-B'], ['']])(
    'refuses the env override %j as forbidden and runs nothing',
    async (name) => {
      const s = scopes.next('env');
      const e = await s.error('exec', { command: 'echo ran', env: { [name]: '/tmp/x' } });
      expect(e.data.kind).toBe('forbidden');
      expect(await s.list()).toEqual([]);
    },
  );

  it('merges a normal env variable over the daemon environment', async () => {
    const s = scopes.next('env2');
    const r = await s.exec({ command: 'echo "v=$PROCCTL_TEST_VAR"; echo "home=${HOME:+set}"', env: { PROCCTL_TEST_VAR: 'hello world' } });
    expect(r.output).toBe('v=hello world\nhome=set\n');
  });

  it('gives every session PROCCTL_SESSION_ID, PROCCTL_SOCKET, PROCCTL_STOP_FILE and a PROCCTL_TMPDIR that exists', async () => {
    const s = scopes.next('ids');
    const r = await s.exec({
      command: 'echo "$PROCCTL_SESSION_ID"; echo "$PROCCTL_SOCKET"; echo "$PROCCTL_STOP_FILE"; echo "$PROCCTL_TMPDIR"; test -d "$PROCCTL_TMPDIR" && echo dir-ok',
    });
    const [id, sock, stop, tmp, ok] = r.output.trim().split('\n');
    expect(id).toBe(r.sessionId);
    expect(sock).toBe(d.socket);
    expect(stop.length).toBeGreaterThan(0);
    expect(tmp.length).toBeGreaterThan(0);
    expect(ok).toBe('dir-ok');
  });

  it('does not let env override PROCCTL_SESSION_ID', async () => {
    const s = scopes.next('ids2');
    const r = await s.request('exec', { command: 'echo "$PROCCTL_SESSION_ID"', env: { PROCCTL_SESSION_ID: 'spoofed' } });
    if (r.error) {
      expect(r.error.data.kind).toBe('forbidden');
    } else {
      expect(r.result.output.trim()).toBe(r.result.sessionId);
    }
  });

  it('stdin "null": the command reads end of input at once', async () => {
    const s = scopes.next('stdin');
    const r = await s.exec({ command: 'read x; echo "rc=$?"', stdin: 'null', yieldMs: 20_000 });
    expect(r.status).toBe('completed');
    expect(r.output).toBe('rc=1\n');
  });

  it('refuses elevated as forbidden', async () => {
    const s = scopes.next('elev');
    const e = await s.error('exec', { command: 'id', elevated: true });
    expect(e.data.kind).toBe('forbidden');
    expect(await s.list()).toEqual([]);
  });

  it('answers an unknown parameter with -32602, kind invalid and its path', async () => {
    const s = scopes.next('bad');
    const e = await s.error('exec', { command: 'true', bogusParam: 1 });
    expect(e.code).toBe(-32602);
    expect(e.data.kind).toBe('invalid');
    expect(e.data.path).toEqual(['bogusParam']);
  });

  it('answers a wrong type and a missing command with -32602 and the path', async () => {
    const s = scopes.next('bad2');
    const e1 = await s.error('exec', { command: 'true', yieldMs: 'soon' });
    expect(e1.code).toBe(-32602);
    expect(e1.data).toMatchObject({ kind: 'invalid', path: ['yieldMs'] });
    const e2 = await s.error('exec', {});
    expect(e2.code).toBe(-32602);
    expect(e2.data).toMatchObject({ kind: 'invalid', path: ['command'] });
  });

  it('runs through the tool method the same way', async () => {
    const s = scopes.next('tool');
    const r = await s.request('tool', { tool: 'exec', command: 'echo via-tool; exit 2' });
    expect(r.result.status).toBe('completed');
    expect(r.result.exitCode).toBe(2);
    expect(r.result.text).toContain('(Command exited with code 2)');
  });

  it('keeps the scratch directory until the session is cleared', async () => {
    const s = scopes.next('tmp');
    const r = await s.exec({ command: 'echo "$PROCCTL_TMPDIR"' });
    const tmp = r.output.trim();
    expect(statSync(tmp).isDirectory()).toBe(true);
    await s.process({ action: 'clear', sessionId: r.sessionId });
    expect(() => statSync(tmp)).toThrow();
  });
});

describe('exec: the shell', () => {
  const shellOf = async (env: Record<string, string>) => {
    const d2 = await startDaemon({ env });
    const c2 = await d2.client();
    try {
      const r = await c2.exec({ command: 'echo "$(readlink -f /proc/$$/exe)"; true' });
      return r.output.trim() as string;
    } finally {
      c2.close();
      expect(await d2.stop()).toBe(0);
    }
  };

  it('SHELL unset (as under systemd) runs commands with /bin/sh', async () => {
    expect(await shellOf({ SHELL: '' })).toBe(realpathSync('/bin/sh'));
  });

  it('a fish SHELL runs commands with bash instead', async () => {
    expect(await shellOf({ SHELL: '/usr/bin/fish' })).toMatch(/\/bash$/);
  });
});
