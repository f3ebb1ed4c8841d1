import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * A review of thousands of files is read, applied, discarded and undone off the daemon's thread
 * (changes/thread.ts): every other request is answered meanwhile, and the review's own requests
 * wait their turn, each deciding once the one before it is done.
 */

const fs = scratchRoot('procctl-review-thread-');
const ws = fs.dir('ws');
const ids = new Set<string>();
let d: TestDaemon;
let s: Scoped;

const FILES = 10_000;

beforeAll(async () => {
  if (SKIP_SANDBOX) return;
  d = await startDaemon({ config: { sandbox: { mode: 'workspace-write', workspaces: [ws] } }, env: { PROCCTL_STATE_DIR: join(fs.root, 'state') } });
  s = new Scoped(await d.client(), 'thread');
});

afterAll(async () => {
  await d?.stop();
  killMarked(ids);
  fs.cleanup();
});

/** A review session that wrote FILES files under `dir` of the workspace, ended. */
async function manyFiles(dir: string): Promise<string> {
  const r = await s.exec({ command: `mkdir ${dir} && cd ${dir} && seq 1 ${FILES} | xargs touch && echo made`, workdir: ws, changes: 'review', yieldMs: 120_000 });
  ids.add(r.sessionId);
  expect(r.status, r.text).toBe('completed');
  return r.sessionId;
}

describe.skipIf(SKIP_SANDBOX)('a large review, off the daemon\'s thread', () => {
  it('answers the requests sent after an apply of 10,000 files before the apply, and a discard sent meanwhile finds them applied', async () => {
    const id = await manyFiles('many');
    const other = await s.exec({ command: 'sleep 60', background: true });
    ids.add(other.sessionId);
    // All on one connection, in this order: the daemon reads them in it. An apply on the daemon's
    // thread answered before it read the next request; now the poll and the status come back first.
    const answered: string[] = [];
    const mark = <T>(name: string, p: Promise<T>) => p.then((r) => (answered.push(name), r));
    const apply = mark('apply', s.process({ action: 'apply', sessionId: id }));
    const discard = mark('discard', s.request('process', { action: 'discard', sessionId: id }));
    const poll = mark('poll', s.process({ action: 'poll', sessionId: other.sessionId }));
    const status = mark('status', s.request('daemon.status'));
    const [a, dis, p, st] = await Promise.all([apply, discard, poll, status]);
    expect(answered.indexOf('poll')).toBeLessThan(answered.indexOf('apply'));
    expect(answered.indexOf('status')).toBeLessThan(answered.indexOf('apply'));
    expect(p.status).toBe('running');
    expect(st.error).toBeUndefined();
    expect(a.applied).toHaveLength(FILES + 1);
    expect(readdirSync(join(ws, 'many'))).toHaveLength(FILES);
    // The discard waited for the apply to be done, then found nothing pending (sent before the apply
    // was done, it would have discarded what the apply was writing from).
    expect(dis.error?.message).toMatch(/applied, not pending/);
    // Undo is read and written there too: the workspace is as it was.
    const u = await s.process({ action: 'undo', sessionId: id });
    expect(u.restored).toHaveLength(FILES + 1);
    expect(existsSync(join(ws, 'many'))).toBe(false);
    await s.process({ action: 'kill', sessionId: other.sessionId });
  });

  it("reads what a job of 10,000 files left as it ends off the daemon's thread: answered meanwhile, and a wait for it answers once it is pending", async () => {
    const r = await s.exec({ command: `mkdir ended && cd ended && seq 1 ${FILES} | xargs touch && echo made && read line`, workdir: ws, changes: 'review', background: true });
    ids.add(r.sessionId);
    await s.waitOutput(r.sessionId, 'made');
    // Its end (stdin closed) and a wait for it, then lists in a row until its changes are pending:
    // a list answered while its tree was read shows it ended with its changes still being settled.
    await s.process({ action: 'write', sessionId: r.sessionId, eof: true });
    const waited = s.process({ action: 'wait', sessionIds: [r.sessionId] });
    let settling = 0;
    let polledSettling = 0;
    let cleared: Promise<any> | undefined;
    for (;;) {
      const mine = (await s.list()).find((x) => x.sessionId === r.sessionId);
      if (mine.status !== 'running' && mine.changes?.state === 'running') {
        settling++;
        // Forgetting it now waits for what it holds to be known: pending, so refused (never dropped unasked).
        cleared ??= s.request('process', { action: 'clear', sessionId: r.sessionId });
      }
      // A poll says so too (its changes' state alone would read as if the job still ran).
      const polled = await s.process({ action: 'poll', sessionId: r.sessionId });
      if (polled.status !== 'running' && polled.changes?.state === 'running') {
        polledSettling++;
        expect(polled.text).toContain('what it wrote is being read');
      }
      if (mine.changes?.state === 'pending') break;
    }
    expect(settling, 'a list answered between its end and its changes settled').toBeGreaterThan(0);
    expect(polledSettling, 'a poll answered between its end and its changes settled').toBeGreaterThan(0);
    const refused = await cleared!;
    expect(refused.error?.data?.kind, JSON.stringify(refused)).toBe('conflict');
    expect(refused.error?.message).toContain(`holds ${FILES + 1} changed paths not applied yet`);
    // The wait answered once they were settled: its record says pending, with every file.
    const w = await waited;
    expect(w.done).toEqual([r.sessionId]);
    expect(w.sessions[0].changes).toMatchObject({ state: 'pending', pending: true, files: FILES + 1 });
    const c = await s.process({ action: 'changes', sessionId: r.sessionId, stat: true });
    expect(c.totals.files).toBe(FILES + 1);
    await s.process({ action: 'discard', sessionId: r.sessionId });
  });

  it('shows and discards a large review while other requests are answered, and a small one as before', async () => {
    const id = await manyFiles('shown');
    const answered: string[] = [];
    const mark = <T>(name: string, p: Promise<T>) => p.then((r) => (answered.push(name), r));
    // --stat: a short answer, all of whose cost is reading the 10,001 entries.
    const shown = mark('changes', s.process({ action: 'changes', sessionId: id, stat: true }));
    const status = mark('status', s.request('daemon.status'));
    const [c] = await Promise.all([shown, status]);
    expect(c.totals.files).toBe(FILES + 1);
    expect(answered).toEqual(['status', 'changes']);
    expect((await s.process({ action: 'changes', sessionId: id, paths: ['shown/1'] })).diff).toContain('shown/1');
    const gone = await s.process({ action: 'discard', sessionId: id });
    expect(gone.state).toBe('discarded');
    expect(existsSync(join(ws, 'shown'))).toBe(false);
    // A one-file review: changes, apply and undo answer as they always have.
    const small = await s.exec({ command: 'echo one > small.txt', workdir: ws, changes: 'review', yieldMs: 60_000 });
    ids.add(small.sessionId);
    expect((await s.process({ action: 'changes', sessionId: small.sessionId, stat: true })).totals.files).toBe(1);
    expect((await s.process({ action: 'apply', sessionId: small.sessionId })).applied).toEqual([{ path: 'small.txt', action: 'write' }]);
    expect((await s.process({ action: 'undo', sessionId: small.sessionId })).restored).toEqual(['small.txt']);
  });
});
