import { execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * Review mode's overlay mounted ahead (runner/premount.ts): once a review session has started in
 * a workspace, the next one's namespaces are made in the background and joined at its exec. A
 * session that joins them must get exactly what it would have mounted itself: its own upper
 * directory, the workspace as it is now, the daemon's mounts as they are now; and nothing of a
 * mount made ahead may reach a job.
 */

const fs = scratchRoot('procctl-ahead-');
const ws = fs.dir('ws');
/** A workspace whose root the job may read but not write (0555). */
const shut = fs.dir('shut');
const ids = new Set<string>();
let d: TestDaemon;
let s: Scoped;

beforeAll(async () => {
  if (SKIP_SANDBOX) return;
  d = await startDaemon({ config: { sandbox: { mode: 'workspace-write', workspaces: [ws, shut] } }, env: { PROCCTL_STATE_DIR: join(fs.root, 'state') } });
  s = new Scoped(await d.client(), 'ahead');
});

afterAll(async () => {
  await d?.stop();
  killMarked(ids);
  fs.cleanup();
});

async function exec(command: string, changes: 'review' | 'direct' = 'review', workdir = ws): Promise<any> {
  const r = await s.exec({ command, workdir, changes, yieldMs: 60_000 });
  ids.add(r.sessionId);
  return r;
}

const ahead = async (): Promise<{ made: number; taken: number; ready: number; making: number; lastError?: string }> => ((await s.request('daemon.status', {})).result as any).changes.ahead;

/** The mounts made ahead after the last review exec are ready (one per workspace used). */
async function readyAhead(): Promise<{ made: number; taken: number }> {
  return waitFor(async () => {
    const a = await ahead();
    expect(a.lastError).toBeUndefined();
    return a.making === 0 && a.ready >= 1 ? a : undefined;
  }, { what: 'a mount made ahead' });
}

describe.skipIf(SKIP_SANDBOX)('review overlays mounted ahead', () => {
  it('the next review session joins the mount made ahead: its own writes held, the workspace as it is now', async () => {
    const first = await exec('echo one > first.txt');
    expect(first.changes).toMatchObject({ pending: true, files: 1 });
    const before = await readyAhead();
    // Written straight into the workspace after the mount was made: the next session sees it.
    writeFileSync(join(ws, 'after.txt'), 'written after\n');
    const second = await exec('cat after.txt; ls; echo two > second.txt');
    expect(second.status, second.text).toBe('completed');
    expect((await ahead()).taken).toBe(before.taken + 1);
    expect(second.output).toContain('written after');
    // The first session's held write is not in the second's view, and neither is in the workspace.
    expect(second.output).not.toContain('first.txt');
    const c = await s.process({ action: 'changes', sessionId: second.sessionId, stat: true });
    expect(c.files.map((f: any) => `${f.kind} ${f.path}`)).toEqual(['added second.txt']);
    expect(() => readFileSync(join(ws, 'second.txt'))).toThrow();
    const applied = await s.process({ action: 'apply', sessionId: second.sessionId });
    expect(applied.conflicts).toEqual([]);
    expect(readFileSync(join(ws, 'second.txt'), 'utf8')).toBe('two\n');
    await s.process({ action: 'discard', sessionId: first.sessionId });
  });

  it('a workspace replaced since the mount was made: the session mounts the new one itself', async () => {
    await exec('true');
    const before = await readyAhead();
    renameSync(ws, `${ws}.old`);
    mkdirSync(ws);
    writeFileSync(join(ws, 'fresh.txt'), 'the new workspace\n');
    const r = await exec('cat fresh.txt');
    expect(r.output).toBe('the new workspace\n');
    expect((await ahead()).taken).toBe(before.taken);
  });

  it.skipIf(process.getuid?.() !== 0)('a mount made on the host since: the session mounts its own and sees it', async () => {
    await exec('true');
    const before = await readyAhead();
    // Outside the workspace (its overlay covers what is mounted under it) and /tmp (private in the sandbox).
    const point = mkdtempSync('/var/tmp/procctl-ahead-');
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'procctl-ahead-test', point]);
    try {
      writeFileSync(join(point, 'marker'), 'on the new mount\n');
      const r = await exec(`cat ${point}/marker`);
      expect(r.output).toBe('on the new mount\n');
      expect((await ahead()).taken).toBe(before.taken);
    } finally {
      execFileSync('umount', [point]);
      rmdirSync(point);
    }
  });

  // The overlay's root takes its mode and owner from the upper root when it is mounted, not after.
  it("the workspace root's mode holds for a session that joins a mount made ahead as for one that mounts its own", async () => {
    writeFileSync(join(shut, 'inside.txt'), 'readable\n');
    chmodSync(shut, 0o555);
    try {
      const direct = await exec('touch root-file', 'direct', shut);
      expect(direct.exitCode, direct.text).not.toBe(0);
      const own = await exec('cat inside.txt; touch root-file', 'review', shut);
      const before = await readyAhead();
      const joined = await exec('cat inside.txt; touch root-file', 'review', shut);
      expect((await ahead()).taken).toBe(before.taken + 1);
      for (const r of [own, joined]) {
        expect(r.output).toContain('readable');
        expect(r.exitCode, r.text).not.toBe(0);
        expect(r.output).toMatch(/Permission denied/);
      }
    } finally {
      chmodSync(shut, 0o755);
    }
  });

  // Attacker's side: the namespaces made ahead are the daemon's descriptors until a session joins them.
  it('no job holds a descriptor of a namespace made ahead, while one is ready', async () => {
    await exec('true');
    await readyAhead();
    for (const changes of ['direct', 'review'] as const) {
      const r = await exec('for f in /proc/self/fd/*; do readlink "$f"; done', changes);
      expect(r.status, r.text).toBe('completed');
      expect(r.output).not.toMatch(/^(mnt|user):\[/m);
    }
  });
});
