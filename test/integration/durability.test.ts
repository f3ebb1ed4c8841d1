import { readdirSync, readFileSync, writeFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { killLeftovers, leftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { journalLines, logLines, makeStateDir, readRecords, removeStateDirs, sessionFiles, sessionsDir } from '../helpers/state.js';

/** Every session pid a test saw; whatever of it a failing daemon leaves behind is killed by pid. */
const started = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(started);
});

afterAll(() => {
  removeStateDirs();
});

/** The fields of a session in `list` that a restart must not change. */
const stable = (s: any) => ({
  sessionId: s.sessionId,
  status: s.status,
  name: s.name,
  command: s.command,
  cwd: s.cwd,
  exitCode: s.exitCode,
  signal: s.signal,
  reason: s.reason,
  startedAt: s.startedAt,
  endedAt: s.endedAt,
  runtimeMs: s.runtimeMs,
  tail: s.tail,
  truncated: s.truncated,
  droppedChars: s.droppedChars,
});

/** The log pages a test compares before and after a restart. */
async function pages(s: Scoped, sessionId: string): Promise<any[]> {
  const out = [];
  for (const p of [{}, { offset: 2, limit: 3 }, { limit: 2 }, { offset: 8 }, { offset: 0, limit: 5 }, { offset: 50 }]) {
    const r = await s.log(sessionId, p);
    out.push({ p, output: r.output, text: r.text, totalLines: r.totalLines, totalChars: r.totalChars, truncated: r.truncated, status: r.status });
  }
  return out;
}

describe('graceful restart', () => {
  it('finished sessions (completed, exit 127, killed) answer list, poll and log the same after SIGTERM and a new daemon', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state, PROCCTL_KILL_GRACE_MS: '1000' };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'rt');

    const ten = await s1.exec({ command: 'for i in 1 2 3 4 5 6 7 8 9 10; do echo "line $i"; done' });
    expect(ten.status).toBe('completed');
    expect(ten.exitCode).toBe(0);
    const missing = await s1.exec({ command: 'procctl-no-such-command-xyz' });
    expect(missing.status).toBe('failed');
    expect(missing.exitCode).toBe(127);
    const sleeper = await s1.exec({ command: 'echo started; sleep 600', background: true });
    started.add(sleeper.pid);
    await s1.waitOutput(sleeper.sessionId, 'started');
    const killed = await s1.process({ action: 'kill', sessionId: sleeper.sessionId });
    expect(killed.status).toBe('failed');
    expect(killed.reason).toBe('user');

    const before = new Map((await s1.list()).map((x: any) => [x.sessionId, stable(x)]));
    expect(before.size).toBe(3);
    const pagesBefore = await pages(s1, ten.sessionId);
    expect(pagesBefore[1].output).toBe('line 3\nline 4\nline 5');

    expect(await d1.stop()).toBe(0);
    expect(leftovers([sleeper.pid])).toEqual([]);

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'rt');
    const after = new Map((await s2.list()).map((x: any) => [x.sessionId, stable(x)]));
    expect([...after.keys()].sort()).toEqual([...before.keys()].sort());
    for (const [id, rec] of before) expect(after.get(id), `session ${id} after the restart`).toEqual(rec);
    expect(after.get(missing.sessionId)).toMatchObject({ status: 'failed', exitCode: 127, reason: 'command_not_found' });
    expect(after.get(sleeper.sessionId)).toMatchObject({ status: 'failed', reason: 'user', signal: 'SIGTERM' });

    // poll: what was never drained, then the end line; a second poll has nothing new.
    const p1 = await s2.process({ action: 'poll', sessionId: ten.sessionId });
    expect(p1.output).toBe(Array.from({ length: 10 }, (_, i) => `line ${i + 1}\n`).join(''));
    expect(p1.status).toBe('completed');
    expect(p1.exitCode).toBe(0);
    expect(p1.text).toMatch(/line 10\nProcess exited with code 0\.$/);
    const p2 = await s2.process({ action: 'poll', sessionId: ten.sessionId });
    expect(p2.output).toBe('');
    expect(p2.text).toBe('Process exited with code 0.');

    const pm = await s2.process({ action: 'poll', sessionId: missing.sessionId });
    expect(pm.exitCode).toBe(127);
    expect(pm.reason).toBe('command_not_found');
    expect(pm.text).toContain('code 127');
    const pk = await s2.process({ action: 'poll', sessionId: sleeper.sessionId });
    expect(pk.output).toBe('started\n');
    expect(pk.reason).toBe('user');
    expect(pk.text).toContain('stopped by kill');

    // log pages exactly as before.
    expect(await pages(s2, ten.sessionId)).toEqual(pagesBefore);
  });

  it('a session keeps how the rules decided it across a restart', async () => {
    const state = makeStateDir();
    const config = { approvals: { rules: [{ command: ['rm'], action: 'deny', reason: 'nothing is removed here' }] } };
    const d1 = await startDaemon({ env: { PROCCTL_STATE_DIR: state }, config });
    const s1 = new Scoped(await d1.client(), 'rules');
    const r = await s1.exec({ command: 'rm -f /tmp/procctl-durable-denied' });
    expect(r.status).toBe('denied');
    const decision = { action: 'deny', part: 'rm -f /tmp/procctl-durable-denied', rule: 0, reason: 'nothing is removed here' };
    expect((await s1.list())[0].decision).toEqual(decision);
    expect(await d1.stop()).toBe(0);
    const d2 = await startDaemon({ env: { PROCCTL_STATE_DIR: state }, config });
    const s2 = new Scoped(await d2.client(), 'rules');
    expect((await s2.list())[0]).toMatchObject({ sessionId: r.sessionId, decision });
    await d2.stop();
  });

  it('output a poll returned before the restart is not returned again after it', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'drain');
    const drained = await s1.exec({ command: 'echo drained-before-restart' });
    expect(drained.status).toBe('completed');
    const firstPoll = await s1.process({ action: 'poll', sessionId: drained.sessionId });
    expect(firstPoll.output).toBe('drained-before-restart\n');
    expect((await s1.process({ action: 'poll', sessionId: drained.sessionId })).output).toBe('');
    expect(await d1.stop()).toBe(0);

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'drain');
    const pd = await s2.process({ action: 'poll', sessionId: drained.sessionId });
    expect(pd.output, 'output a poll already returned before the restart came back').toBe('');
    expect(pd.text).toBe('Process exited with code 0.');
    // log never drains: it still has it.
    expect((await s2.log(drained.sessionId)).output).toBe('drained-before-restart');
  });

  it('log pages over the spool (beyond the in-memory cap) before and after a restart', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state, PROCCTL_MAX_OUTPUT_CHARS: '2000' };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'spool');
    const r = await s1.exec({ command: 'seq 1 20000', yieldMs: 30_000 });
    expect(r.status).toBe('completed');
    expect(r.droppedChars).toBeGreaterThan(100_000);

    const check = async (s: Scoped, when: string) => {
      const head = await s.log(r.sessionId, { offset: 0, limit: 5 });
      expect(head.output, `first lines ${when}`).toBe('1\n2\n3\n4\n5');
      expect(head.totalLines).toBe(20000);
      expect(head.truncated).toBe(false);
      const mid = await s.log(r.sessionId, { offset: 9999, limit: 2 });
      expect(mid.output, `middle lines ${when}`).toBe('10000\n10001');
      const tail = await s.log(r.sessionId, { limit: 3 });
      expect(tail.output).toBe('19998\n19999\n20000');
      return [head, mid, tail].map((x) => ({ output: x.output, text: x.text, totalLines: x.totalLines, totalChars: x.totalChars }));
    };
    const before = await check(s1, 'before the restart');
    expect(await d1.stop()).toBe(0);

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'spool');
    expect(await check(s2, 'after the restart')).toEqual(before);
  });

  const rotEnv = (state: string) => ({
    PROCCTL_STATE_DIR: state,
    PROCCTL_MAX_OUTPUT_CHARS: '2000',
    PROCCTL_PENDING_MAX_OUTPUT_CHARS: '2000',
    PROCCTL_MAX_LOG_BYTES: '20000',
  });
  /** `seq 1 20000` prints this many bytes, more than five times the spool's cap below. */
  const SEQ_20000_BYTES = 108_894;
  const spoolBytesOf = (state: string, id: string) =>
    sessionFiles(state, id)
      .filter((f) => f.name.includes('.log'))
      .reduce((n, f) => n + f.size, 0);

  it('with a small maxLogBytes the spool rotates and the state dir stays bounded', async () => {
    const state = makeStateDir();
    const maxLogBytes = 20_000;
    const d1 = await startDaemon({ env: rotEnv(state) });
    const s1 = new Scoped(await d1.client(), 'rot');
    // Written to a file first, then copied out in one burst: the daemon reads it in big chunks.
    const r = await s1.exec({ command: 'seq 1 20000 > "$PROCCTL_TMPDIR/out" && cat "$PROCCTL_TMPDIR/out"', yieldMs: 30_000 });
    expect(r.status).toBe('completed');

    // The spool is written off the exec path: log waits for it to be written, so ask first.
    const page = await s1.log(r.sessionId, { limit: 3 });
    const files = sessionFiles(state, r.sessionId);
    const spoolBytes = spoolBytesOf(state, r.sessionId);
    // The record is a line of the journal of ended sessions, appended off the answer's path: waited for.
    const recordOf = () => journalLines(state).filter((l) => l.includes(`"id":"${r.sessionId}"`)).reduce((n, l) => n + l.length + 1, 0);
    const recordBytes = await waitFor(() => recordOf() || undefined, { what: 'the record in the journal' });
    const allBytes = files.reduce((n, f) => n + f.size, recordBytes);
    console.log(`session files ${JSON.stringify(files)}: spool ${spoolBytes} bytes, with the record ${allBytes} bytes (maxLogBytes ${maxLogBytes})`);
    expect(files.map((f) => f.name)).toContain(`${r.sessionId}.log.1`);
    expect.soft(spoolBytes, 'spool bytes on disk').toBeLessThanOrEqual(maxLogBytes);
    // The record holds at most the retained and the pending output, plus metadata.
    expect.soft(allBytes, 'all bytes of the session on disk').toBeLessThanOrEqual(maxLogBytes + 2000 + 2 * 2000 + 4096);

    expect(page.output).toBe('19998\n19999\n20000');
    expect(page.truncated).toBe(true);
    const rotated = Number(/(\d+) earlier bytes are missing: \d+ rotated away \(maxLogBytes/.exec(page.text)?.[1]);
    expect(rotated, page.text).toBeGreaterThan(0);
    // What rotated away plus what the spool holds is all the output.
    expect(rotated + spoolBytes).toBe(SEQ_20000_BYTES);
  });

  it('after a restart, log over a rotated spool reads the same and still says what rotated away', async () => {
    const state = makeStateDir();
    const d1 = await startDaemon({ env: rotEnv(state) });
    const s1 = new Scoped(await d1.client(), 'rot2');
    const r = await s1.exec({ command: 'seq 1 20000', yieldMs: 30_000 });
    expect(r.status).toBe('completed');

    const view = async (s: Scoped) => {
      const tail = await s.log(r.sessionId, { limit: 3 });
      const head = await s.log(r.sessionId, { offset: 0, limit: 2 });
      return {
        tail: tail.output,
        head: head.output,
        totalLines: head.totalLines,
        truncated: tail.truncated,
        droppedBytes: tail.droppedBytes,
        text: tail.text,
      };
    };
    // Once the spool has settled (everything written, rotations done).
    const before = await waitFor(
      async () => {
        const v = await view(s1);
        return v.droppedBytes + spoolBytesOf(state, r.sessionId) === SEQ_20000_BYTES ? v : undefined;
      },
      { what: 'the spool to settle' },
    );
    if (!before) throw new Error('unreachable');
    expect(before.tail).toBe('19998\n19999\n20000');
    expect(before.truncated).toBe(true);
    expect(before.text).toMatch(/\d+ earlier bytes are missing: \d+ rotated away/);
    expect(await d1.stop()).toBe(0);

    const d2 = await startDaemon({ env: rotEnv(state) });
    const s2 = new Scoped(await d2.client(), 'rot2');
    expect(await view(s2)).toEqual(before);
  });
});

describe('graceful shutdown of many sessions', () => {
  it('SIGTERM with 100 running sessions exits 0 within the grace, leaves no process and records them failed/shutdown', async () => {
    const state = makeStateDir();
    const graceMs = 1000;
    const d = await startDaemon({ env: { PROCCTL_STATE_DIR: state, PROCCTL_MAX_SESSIONS: '200', PROCCTL_KILL_GRACE_MS: String(graceMs) } });
    const s = new Scoped(await d.client(), 'many');
    const ids: string[] = [];
    const pids: number[] = [];
    for (let batch = 0; batch < 10; batch++) {
      const rs = await Promise.all(Array.from({ length: 10 }, () => s.exec({ command: 'sleep 600', background: true })));
      for (const r of rs) {
        expect(r.status).toBe('running');
        ids.push(r.sessionId);
        pids.push(r.pid);
        started.add(r.pid);
      }
    }
    expect(pids.filter((p) => alive(p))).toHaveLength(100);

    const t0 = Date.now();
    const code = await d.stop();
    const took = Date.now() - t0;
    console.log(`graceful shutdown with 100 running sessions took ${took} ms (grace ${graceMs} ms)`);
    expect(code).toBe(0);
    expect(took).toBeLessThan(10_000);
    expect(leftovers(pids)).toEqual([]);

    const records = readRecords(state);
    for (const id of ids) {
      expect(records.get(id), `record of ${id}`).toMatchObject({ status: 'failed', reason: 'shutdown' });
      expect(records.get(id).endedAt).toBeTypeOf('number');
    }
  });
});

describe('corrupt state', () => {
  it('a truncated record, JSON that is not a record and a stray .json.tmp are set aside; the daemon starts and serves', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'corrupt');
    const good = await s1.exec({ command: 'echo good' });
    expect(good.status).toBe('completed');
    expect(await d1.stop()).toBe(0);

    const dir = sessionsDir(state);
    const goodText = journalLines(state).find((l) => l.includes(`"id":"${good.sessionId}"`))!;
    expect(goodText, 'the record of the ended session, in the journal').toBeDefined();
    writeFileSync(join(dir, 'trunc001.json'), goodText.replace(good.sessionId, 'trunc001').slice(0, Math.floor(goodText.length / 2)));
    writeFileSync(join(dir, 'other002.json'), JSON.stringify({ hello: 'world', list: [1, 2, 3] }));
    writeFileSync(join(dir, 'array003.json'), '[1,2,3]');
    writeFileSync(join(dir, 'stray004.json.tmp'), goodText.slice(0, 40));

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'corrupt');
    const listed = await s2.list();
    expect(listed.map((x: any) => x.sessionId)).toEqual([good.sessionId]);
    expect((await s2.log(good.sessionId)).output).toBe('good');
    const fresh = await s2.exec({ command: 'echo still serving' });
    expect(fresh.output).toBe('still serving\n');

    const names = readdirSync(dir);
    for (const f of ['trunc001.json', 'other002.json', 'array003.json']) {
      expect(names, `${f} is renamed`).toContain(`${f}.corrupt`);
      expect(names).not.toContain(f);
    }
    // An unfinished write of the last run: its record (if any) is the previous version; the temp file goes.
    expect(names).not.toContain('stray004.json.tmp');

    const warnings = logLines(d2.stdout()).filter((l) => l.level === 40 && /corrupt/.test(l.msg));
    expect(warnings.map((w) => w.file).sort()).toEqual(['array003.json', 'other002.json', 'trunc001.json'].map((f) => join(dir, f)));
  });

  it('a record that looks like one but lacks fields is set aside too, not fatal', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'partial');
    const good = await s1.exec({ command: 'echo good' });
    expect(await d1.stop()).toBe(0);

    // What an older or newer version, or a hand edit, might leave: the keys a record starts with, not all of them.
    const partial = { v: 1, id: 'part0001', scope: 'partial', command: 'echo x', startedAt: Date.now() - 1000, status: 'completed', output: { retained: 'x\n' } };
    writeFileSync(join(sessionsDir(state), 'part0001.json'), JSON.stringify(partial));

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'partial');
    const ids = (await s2.list()).map((x: any) => x.sessionId);
    expect(ids).toContain(good.sessionId);
    // Either restored as far as it goes, or set aside: never a daemon that cannot start.
    if (!ids.includes('part0001')) expect(existsSync(join(sessionsDir(state), 'part0001.json.corrupt'))).toBe(true);
    expect((await s2.exec({ command: 'echo ok' })).output).toBe('ok\n');
  });

  it('bad lines in the journal of ended sessions are set aside, a torn last line does not swallow the next record, and the rest is served', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'journal');
    const good = await s1.exec({ command: 'echo good' });
    const other = await s1.exec({ command: 'echo other' });
    expect(await d1.stop()).toBe(0);

    const journal = join(sessionsDir(state), 'ended.jsonl');
    const lines = journalLines(state);
    const otherLine = lines.find((l) => l.includes(`"id":"${other.sessionId}"`))!;
    const running = JSON.stringify({ ...JSON.parse(otherLine), id: 'runs0001', status: 'running', exitCode: undefined });
    // A hand edit in the middle, a line that claims a session still runs, and a write the last run did not finish.
    writeFileSync(journal, [lines.find((l) => l.includes(`"id":"${good.sessionId}"`)), 'not json at all', running, otherLine.slice(0, 50)].join('\n'));

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'journal');
    expect((await s2.list()).map((x: any) => x.sessionId)).toEqual([good.sessionId]);
    expect((await s2.log(good.sessionId)).output).toBe('good');
    const bad = readFileSync(`${journal}.corrupt`, 'utf8').split('\n').filter(Boolean);
    expect(bad).toEqual(['not json at all', running, otherLine.slice(0, 50)]);
    const warnings = logLines(d2.stdout()).filter((l) => l.level === 40 && /corrupt line of the journal/.test(l.msg));
    expect(warnings.map((w) => w.line)).toEqual([2, 3, 4]);

    // The journal was rewritten whole: a record appended now is a line of its own and comes back.
    const fresh = await s2.exec({ command: 'echo fresh' });
    expect(await d2.stop()).toBe(0);
    const d3 = await startDaemon({ env });
    const s3 = new Scoped(await d3.client(), 'journal');
    expect((await s3.list()).map((x: any) => x.sessionId).sort()).toEqual([good.sessionId, fresh.sessionId].sort());
    expect((await s3.log(fresh.sessionId)).output).toBe('fresh');
  });
});

describe('spool turned off', () => {
  it('with maxLogBytes 0 nothing is spooled and log still shows the retained output', async () => {
    const state = makeStateDir();
    const d = await startDaemon({ env: { PROCCTL_STATE_DIR: state, PROCCTL_MAX_OUTPUT_CHARS: '100', PROCCTL_MAX_LOG_BYTES: '0' } });
    const s = new Scoped(await d.client(), 'nospool');
    const r = await s.exec({ command: 'seq 1 1000' });
    expect(r.droppedChars).toBeGreaterThan(0);
    expect(r.output).toMatch(/999\n1000\n$/);
    // A finished session's record is written just after the answer, as a line of the journal. On a
    // loaded machine the command can outlive the 100 ms after which a running session's record gets
    // a file of its own: that file goes when the final record is journaled, so wait for the final one.
    await waitFor(() => ['running', undefined].includes(readRecords(state).get(r.sessionId)?.status) === false, { what: 'the final record on disk' });
    expect(sessionFiles(state, r.sessionId), 'no spool, and no record file of its own').toEqual([]);
    const log = await s.log(r.sessionId, { limit: 2 });
    expect(log.output, 'log of a session whose output went past the cap, without a spool').toBe('999\n1000');
  });
});

describe('one daemon per state dir', () => {
  it('a second daemon on the same state dir (another socket) does not take over the running sessions of the first', async () => {
    // As when someone runs `procctld --socket /tmp/x.sock` by hand next to the user service:
    // both default to ~/.local/state/procctl.
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'two');
    const r = await s1.exec({ command: 'sleep 600', background: true });
    started.add(r.pid);

    let second: Awaited<ReturnType<typeof startDaemon>> | undefined;
    let refused: Error | undefined;
    try {
      second = await startDaemon({ env });
    } catch (err) {
      refused = err as Error; // refusing to start, with a message naming the state dir, is fine too
    }
    if (refused) expect(refused.message).toMatch(/state/i);
    // Whatever the second one did, the first one's session is untouched.
    if (second) await (await second.client()).call('daemon.status');
    expect(alive(r.pid), 'the first daemon’s running session').toBe(true);
    const listed = (await s1.list()).find((x: any) => x.sessionId === r.sessionId);
    expect(listed.status).toBe('running');
    expect(readRecords(state).get(r.sessionId)?.status, 'its record on disk').toBe('running');
  });
});

describe('state dir stays bounded', () => {
  it('clear deletes the record and the spool of a session', async () => {
    const state = makeStateDir();
    const d = await startDaemon({ env: { PROCCTL_STATE_DIR: state, PROCCTL_MAX_OUTPUT_CHARS: '100' } });
    const s = new Scoped(await d.client(), 'bounded');
    const r = await s.exec({ command: 'seq 1 1000' });
    // The record is written off the exec path: wait for it, and for no write still in flight.
    const settled = () => {
      const files = sessionFiles(state, r.sessionId);
      const names = files.map((f) => f.name).sort().join(' ');
      return names === `${r.sessionId}.log` && files.every((f) => f.size > 0) && readRecords(state).get(r.sessionId)?.status === 'completed';
    };
    await waitFor(settled, { what: 'the spool and the record on disk, nothing else' });
    await s.process({ action: 'clear', sessionId: r.sessionId });
    expect(sessionFiles(state, r.sessionId)).toEqual([]);
    expect(readRecords(state).has(r.sessionId)).toBe(false);
    // It was the only ended session: the journal is gone with it.
    expect(readdirSync(sessionsDir(state))).toEqual([]);
  });
});
