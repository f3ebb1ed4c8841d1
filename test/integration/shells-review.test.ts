import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { TestClient } from '../helpers/rpc.js';
import { waitFor } from '../helpers/daemon.js';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * A shell in review mode (SPEC §16, §20), with a real sandbox and real overlays: each command's
 * changes are held as its own review session's, applied or discarded one by one, while the
 * shell's directory, variables and functions go on from one command to the next.
 */

const fs = scratchRoot('procctl-shell-review-');
const ws = fs.dir('ws');
const ids = new Set<string>();
let d: TestDaemon;
let s: Scoped;

beforeAll(async () => {
  if (SKIP_SANDBOX) return;
  d = await startDaemon({ config: { sandbox: { mode: 'workspace-write', workspaces: [ws] } }, env: { PROCCTL_STATE_DIR: join(fs.root, 'state') } });
  s = new Scoped(await d.client(), 'review');
});

afterAll(async () => {
  await d?.stop();
  killMarked(ids);
  fs.cleanup();
});

async function run(command: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await s.exec({ command, shell: 'rv', yieldMs: 60_000, ...extra });
  ids.add(r.sessionId);
  return r;
}

describe.skipIf(SKIP_SANDBOX)('a review-mode shell', () => {
  it("holds each command's changes as its own: the first applied, the second discarded, the shell's state kept", async () => {
    writeFileSync(join(ws, 'keep.txt'), 'original\n');
    const first = await run('mkdir sub && cd sub && echo a > a.txt && export V=one; x=two; f() { echo "fn $1"; }; alias hi="echo hello"; echo made', { workdir: ws, changes: 'review' });
    expect(first.status, first.text).toBe('completed');
    expect(first.output).toBe('made\n');
    expect(first.shell).toEqual({ name: 'rv', cwd: join(ws, 'sub') });
    expect(first.changes).toMatchObject({ state: 'pending', files: 2 });
    expect(existsSync(join(ws, 'sub'))).toBe(false);
    const applied = await s.process({ action: 'apply', sessionId: first.sessionId });
    expect(applied.conflicts).toEqual([]);
    expect(readFileSync(join(ws, 'sub', 'a.txt'), 'utf8')).toBe('a\n');

    // Review mode is the shell's: the next commands need not ask for it.
    const second = await run('echo "$V $x $PWD"; f arg; hi; cat a.txt; echo b > b.txt; echo changed > ../keep.txt; (exit 4)');
    expect(second.status, second.text).toBe('completed');
    expect(second.exitCode).toBe(4);
    expect(second.output).toBe(`one two ${join(ws, 'sub')}\nfn arg\nhello\na\n`);
    expect(second.changes).toMatchObject({ state: 'pending', files: 2 });
    expect(second.sessionId).not.toBe(first.sessionId);
    await s.process({ action: 'discard', sessionId: second.sessionId });
    expect(existsSync(join(ws, 'sub', 'b.txt'))).toBe(false);
    expect(readFileSync(join(ws, 'keep.txt'), 'utf8')).toBe('original\n');

    // The shell goes on: its directory, variables and functions, the first's change seen, the second's not.
    const third = await run('echo "$V $x"; pwd; ls; cat ../keep.txt; f; unset V');
    expect(third.output).toBe(`one two\n${join(ws, 'sub')}\na.txt\noriginal\nfn \n`);
    expect(third.changes).toMatchObject({ files: 0 });
    const fourth = await run('echo "[${V-unset}] $x"');
    expect(fourth.output).toBe('[unset] two\n');
    const listed = (await s.request('shell.list', {})).result.shells;
    expect(listed[0]).toMatchObject({ name: 'rv', state: 'idle', commands: 4, settings: { review: true } });
    // A command that would write directly is refused in it, naming the shell's review mode.
    const direct = await s.error('exec', { command: 'true', shell: 'rv', changes: 'direct' });
    expect(direct.message).toContain('review mode');
    // `exit` ends the shell: its state is gone, and the next command says so.
    const ended = await run('exit 3');
    expect(ended.exitCode).toBe(3);
    const fresh = await run('echo "[${x-}]"; pwd');
    expect(fresh.shell.restarted).toBe(true);
    expect(fresh.output).toBe(`[]\n${ws}\n`);
  });

  it('keeps its state across a planned restart, and a command running then ends with its changes held', async () => {
    const first = await s.exec({ command: 'export CARRIED=yes', shell: 'rr', workdir: ws, changes: 'review', yieldMs: 60_000 });
    ids.add(first.sessionId);
    expect(first.status, first.text).toBe('completed');
    const running = await s.exec({ command: 'sleep 1; echo late > late.txt; echo "$CARRIED"', shell: 'rr', workdir: ws, yieldMs: 0, background: true });
    ids.add(running.sessionId);
    const c = await TestClient.connect(d.socket);
    await c.call('daemon.restart', { scope: '*', approverToken: readFileSync(`${d.socket}.approver`, 'utf8').trim() });
    c.close();
    await waitFor(async () => {
      try {
        const c2 = await TestClient.connect(d.socket);
        try {
          return (await c2.call('daemon.status')).restarts.planned > 0;
        } finally {
          c2.close();
        }
      } catch {
        return false;
      }
    }, { what: 'the new image to serve', timeoutMs: 30_000 });
    s = new Scoped(await d.client(), 'review');
    const { last } = await s.pollUntilEnded(running.sessionId, 30_000);
    expect(last.status).toBe('completed');
    expect((await s.log(running.sessionId, { offset: 0 })).output).toBe('yes');
    // Its write is held as any review session's, not in the workspace.
    expect((await s.process({ action: 'changes', sessionId: running.sessionId, stat: true })).totals).toMatchObject({ files: 1, added: 1 });
    expect(existsSync(join(ws, 'late.txt'))).toBe(false);
    const after = await s.exec({ command: 'echo "$CARRIED $PWD"', shell: 'rr', yieldMs: 60_000 });
    ids.add(after.sessionId);
    expect(after.output).toBe(`yes ${ws}\n`);
    expect(after.shell.restarted).toBeUndefined();
  });
});
