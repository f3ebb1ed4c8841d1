import { chmodSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { logLines, makeStateDir, readRecords, removeStateDirs, sessionsDir } from '../helpers/state.js';
import { hasCap } from '../helpers/caps.js';

/**
 * Root ignores permission bits through its capabilities: where this process has them, the daemon
 * runs without them (setpriv drops them from its bounding set), so a directory made read-only
 * refuses it as it would refuse any other user. Root without them (in a sandbox) needs nothing.
 */
const bypass = (['dacOverride', 'dacReadSearch', 'fowner'] as const).some(hasCap);
const asUser = bypass ? ['setpriv', '--bounding-set', '-dac_override,-dac_read_search,-fowner', '--'] : [];
const CANNOT_DROP = bypass && !hasCap('setpcap') ? 'this process can bypass permission bits but cannot drop that from a child (no CAP_SETPCAP)' : undefined;
if (CANNOT_DROP) process.stderr.write(`skipping the disk fault tests: ${CANNOT_DROP}\n`);

afterEach(stopAllDaemons);
afterAll(removeStateDirs);

async function start(state: string): Promise<{ d: TestDaemon; s: Scoped }> {
  const d = await startDaemon({ launcher: asUser, env: { PROCCTL_STATE_DIR: state, PROCCTL_MAX_OUTPUT_CHARS: '1000', PROCCTL_LOG_LEVEL: 'info' } });
  return { d, s: new Scoped(await d.client(), 'disk') };
}

const status = async (s: Scoped) => (await s.c.call('daemon.status')).state;
const faultLines = (d: TestDaemon) => logLines(d.stdout()).filter((l) => /does not take writes/.test(l.msg));
const writable = (dir: string, yes: boolean) => chmodSync(dir, yes ? 0o700 : 0o500);

describe.skipIf(CANNOT_DROP !== undefined)('the state directory refuses writes', () => {
  it('is told in daemon.status and once in the log, log says what was not spooled, and writes resume by themselves', async () => {
    const state = makeStateDir();
    const { d, s } = await start(state);
    expect(await status(s)).toEqual({ dir: state, writable: true });

    writable(sessionsDir(state), false);
    const during: any[] = [];
    for (let i = 0; i < 5; i++) during.push(await s.exec({ command: `seq 1 ${300 + i}` }));
    for (const r of during) expect(r.status).toBe('completed');
    const st = await status(s);
    expect(st.writable).toBe(false);
    expect(st.error).toMatch(/EACCES|permission denied/i);
    expect(faultLines(d), 'one warning for the fault, not one per write').toHaveLength(1);

    // Its output is still served from memory, and log says the spool does not have it.
    const log = await s.log(during[4].sessionId);
    expect(log.notSpooled.bytes).toBeGreaterThan(0);
    expect(log.notSpooled.error).toMatch(/EACCES|permission denied/i);
    expect(log.text).toMatch(/were not spooled to disk \(.*\): a daemon restart will not have them/);
    expect(log.output.split('\n').at(-1)).toBe('304');

    writable(sessionsDir(state), true);
    // Records that waited are written without any request; status turns writable again.
    await waitFor(async () => (await status(s)).writable || undefined, { what: 'the state directory to be writable again' });
    await waitFor(() => during.every((r) => readRecords(state).has(r.sessionId)) || undefined, { what: 'the waiting records on disk' });
    // The log line is written when the directory takes writes again; it reaches this process's pipe a moment later.
    await waitFor(() => logLines(d.stdout()).some((l) => /takes writes again/.test(l.msg)) || undefined, { what: 'the log line saying the state directory takes writes again' });

    // New sessions spool again: past the in-memory cap, log pages over the spool.
    const after = await s.exec({ command: 'seq 1 2000' });
    const page = await s.log(after.sessionId, { offset: 0, limit: 2 });
    expect(page.source).toBe('spool');
    expect(page.output).toBe('1\n2');
    expect(page.notSpooled).toBeUndefined();

    // A restart knows every session that finished while the directory refused writes.
    await d.stop();
    const again = await start(state);
    const ids = (await again.s.list()).map((x: any) => x.sessionId);
    for (const r of during) expect(ids).toContain(r.sessionId);
  });

  it('a write that fails is told by daemon.status even when another write in the directory still succeeds, until one of its kind succeeds again', async () => {
    const state = makeStateDir();
    const { d, s } = await start(state);
    // A session ended before the fault: the journal of ended sessions exists and stays writable.
    const before = await s.exec({ command: 'echo before' });
    await waitFor(() => readRecords(state).has(before.sessionId) || undefined, { what: 'the first record in the journal' });

    // New files cannot be made (no spool), but a line still goes to the journal that exists.
    writable(sessionsDir(state), false);
    const during = await s.exec({ command: 'seq 1 3000' });
    expect(during.status).toBe('completed');
    await waitFor(() => readRecords(state).has(during.sessionId) || undefined, { what: 'its final record appended to the journal' });
    await waitFor(() => faultLines(d).length > 0 || undefined, { what: 'the warning that the directory does not take writes' });
    const st = await status(s);
    expect(st.writable, 'the journal\'s append does not hide that the spool could not be made').toBe(false);
    expect(st.error).toMatch(/EACCES|permission denied/i);
    expect((await s.log(during.sessionId)).notSpooled.bytes).toBeGreaterThan(0);

    // Legitimate use: writable again, the next spool is made, and status says so.
    writable(sessionsDir(state), true);
    const after = await s.exec({ command: 'seq 1 3000' });
    expect((await s.log(after.sessionId, { offset: 0, limit: 2 })).source).toBe('spool');
    await waitFor(async () => (await status(s)).writable || undefined, { what: 'status to say writable again' });
    expect(await status(s)).toEqual({ dir: state, writable: true });
  });

  it('every read-only request answers while the state directory refuses writes from the start: status says review is unavailable and why, and the state\'s health', async () => {
    const state = makeStateDir();
    const { s } = await start(state);
    const done = await s.exec({ command: 'echo before' });
    await waitFor(() => readRecords(state).has(done.sessionId) || undefined, { what: 'the first record on disk' });

    // Nobody asked for status yet: its review probe meets the refusal first.
    writable(state, false);
    const st = await s.c.call('daemon.status');
    expect(st.changes).toMatchObject({ review: false, reason: expect.stringMatching(/state directory .* refuses writes \((EACCES|.*permission denied).*\); make it writable/i) });
    expect(st.state).toMatchObject({ dir: state, writable: false, error: expect.stringMatching(/EACCES|permission denied/i) });
    // The rest of what is read only: none of it writes, none of it fails.
    expect((await s.list()).map((x: any) => x.sessionId)).toContain(done.sessionId);
    expect((await s.process({ action: 'poll', sessionId: done.sessionId })).status).toBe('completed');
    expect((await s.log(done.sessionId)).output).toBe('before');
    expect((await s.c.call('history', { scope: 'disk', sessionId: done.sessionId })).sessions).toHaveLength(1);
    expect((await s.c.call('policy.check', { scope: 'disk', command: 'ls' })).decision).toBeDefined();
    await s.c.call('approvals.list', { scope: 'disk' });
    expect((await s.c.call('daemon.diagnostics')).fds).toBeGreaterThan(0);
    // Asked again, still an answer (the probe is tried again, not remembered as the host's).
    expect((await s.c.call('daemon.status')).changes.review).toBe(false);

    // Writable again: the probe runs for real and the state is healthy again.
    writable(state, true);
    const again = await s.c.call('daemon.status');
    expect(again.changes.reason ?? '').not.toMatch(/refuses writes/);
    expect(again.state).toEqual({ dir: state, writable: true });
  });

  it('clear and remove are all or nothing: unavailable, and the session stays, also after a restart', async () => {
    const state = makeStateDir();
    const { d, s } = await start(state);
    const done = await s.exec({ command: 'echo kept' });
    const running = await s.exec({ command: 'sleep 30', background: true });
    await waitFor(() => readRecords(state).has(done.sessionId) && readRecords(state).has(running.sessionId), { what: 'both records on disk' });

    // The directory and the journal of ended sessions in it (a file opened for each line) refuse writes.
    const journal = join(sessionsDir(state), 'ended.jsonl');
    writable(sessionsDir(state), false);
    chmodSync(journal, 0o400);
    for (const [action, id] of [
      ['clear', done.sessionId],
      ['remove', running.sessionId],
    ]) {
      const err = await s.error('process', { action, sessionId: id });
      expect(err.data.kind, action).toBe('unavailable');
      expect(err.message).toMatch(new RegExp(`session ${id} was not forgotten: its record .* cannot be deleted .*; it stays listed\\. Make .* writable and try again`));
    }
    const listed = (await s.list()).map((x: any) => x.sessionId);
    expect(listed).toContain(done.sessionId);
    expect(listed).toContain(running.sessionId);
    expect((await s.log(done.sessionId)).output).toBe('kept');

    // Restart with the directory still refusing: nothing reported gone comes back, nothing is lost.
    await d.stop();
    writable(sessionsDir(state), true);
    chmodSync(journal, 0o600);
    const again = await start(state);
    const after = (await again.s.list()).map((x: any) => x.sessionId);
    expect(after).toContain(done.sessionId);
    expect(after).toContain(running.sessionId);

    // Writable again: clear forgets it, for good.
    await again.s.process({ action: 'clear', sessionId: done.sessionId });
    expect(readRecords(state).has(done.sessionId)).toBe(false);
    expect(existsSync(join(sessionsDir(state), `${done.sessionId}.json`))).toBe(false);
    await again.d.stop();
    const third = await start(state);
    expect((await third.s.list()).map((x: any) => x.sessionId)).not.toContain(done.sessionId);
  });
});
