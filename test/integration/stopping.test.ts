import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, PROCCTL, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers, waitGone } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes, within } from '../helpers/session.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;
const clients: TestClient[] = [];
/** Pids a test learned from a job's output (grandchildren that left the session's group). */
const escaped = new Set<number>();

beforeAll(async () => {
  d = await startDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' } });
  c = await d.client();
  scopes = new Scopes(() => c);
});

afterAll(async () => {
  try {
    killLeftovers(await waitGone(escaped, 2000));
    await scopes.finish(d);
  } finally {
    for (const x of [c, ...clients]) x?.close();
    await stopAllDaemons();
  }
});

async function bg(s: Scoped, command: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await s.exec({ command, background: true, ...extra });
  expect(r.status).toBe('running');
  scopes.track(r.pid);
  return r;
}

/** Live processes whose environment carries this session's marker (what the daemon's sweep looks for). */
function markedProcesses(sessionId: string): number[] {
  const marker = `PROCCTL_SESSION_ID=${sessionId}\0`;
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const env = readFileSync(`/proc/${entry}/environ`, 'latin1');
      if ((env.startsWith(marker) || env.includes(`\0${marker}`)) && alive(Number(entry))) out.push(Number(entry));
    } catch {
      // gone, or not ours to read
    }
  }
  return out;
}

/** The process group of a pid, from /proc. */
function pgrpOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[2]);
}

/** Read `name=<pid>` from a session's output once it is there. */
async function printedPid(s: Scoped, sessionId: string, name: string): Promise<number> {
  const re = new RegExp(`${name}=(\\d+)`);
  const out = await waitFor(async () => re.exec((await s.log(sessionId, { offset: 0 })).output), { what: `${name}=<pid> in the output` });
  const pid = Number(out![1]);
  escaped.add(pid);
  return pid;
}

/** A job that ignores SIGTERM and stops only when it sees its stop file, printing it. */
const STOP_FILE_JOB = `trap '' TERM; echo ready; while [ ! -f "$PROCCTL_STOP_FILE" ]; do sleep 0.05; done; cat "$PROCCTL_STOP_FILE"; exit 0`;
/** A job that ignores SIGTERM, so only SIGKILL ends it. */
const DEAF_JOB = "trap '' TERM; echo ready; sleep 60";

/** Start in the background and wait until the job says `ready` (its traps are set by then). */
async function ready(s: Scoped, command: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await bg(s, command, extra);
  await s.waitOutput(r.sessionId, 'ready');
  return r;
}

/** The stop file a STOP_FILE_JOB printed. */
async function stopFileSeen(s: Scoped, sessionId: string): Promise<any> {
  const out: string = (await s.log(sessionId, { offset: 0 })).output;
  return JSON.parse(out.split('\n').find((l) => l.startsWith('{'))!);
}

describe('kill', () => {
  it('writes the stop file first: a job that watches it ends within the grace', async () => {
    const s = scopes.next('stopfile');
    const r = await ready(s, STOP_FILE_JOB);
    const k = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 15_000, reason: 'deploying a fix' });
    expect(k).toMatchObject({ sessionId: r.sessionId, status: 'failed', reason: 'user', exitCode: 0 });
    expect(k.stop).toMatchObject({ reason: 'deploying a fix', by: 'user', signal: 'SIGTERM', graceful: true });
    expect(Number.isNaN(Date.parse(k.stop.requestedAt))).toBe(false);
    const body = await stopFileSeen(s, r.sessionId);
    expect(body).toEqual({ sessionId: r.sessionId, timestamp: k.stop.requestedAt, reason: 'deploying a fix', by: 'user', signal: 'SIGTERM' });
    // Without a text, the reason is who stopped it; the final record keeps both.
    const plain = await ready(s, STOP_FILE_JOB);
    const k2 = await s.process({ action: 'kill', sessionId: plain.sessionId, graceMs: 15_000 });
    expect(k2.stop).toMatchObject({ reason: 'user', by: 'user' });
    expect(await stopFileSeen(s, plain.sessionId)).toEqual({ sessionId: plain.sessionId, timestamp: k2.stop.requestedAt, reason: 'user', by: 'user', signal: 'SIGTERM' });
  });

  it('SIGKILLs a job that ignores the stop signal once the grace is over', async () => {
    const s = scopes.next('sigkill');
    const r = await ready(s, DEAF_JOB);
    const t0 = Date.now();
    const k = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 500 });
    const elapsed = Date.now() - t0;
    expect(k).toMatchObject({ status: 'failed', reason: 'user', signal: 'SIGKILL' });
    expect(k.stop).toMatchObject({ signal: 'SIGTERM', graceful: false });
    expect(elapsed).toBeGreaterThanOrEqual(500);
    expect(elapsed).toBeLessThan(15_000);
    expect(await waitGone([r.pid], 5000)).toEqual([]);
  });

  it('stops a double-forked grandchild that left the group and the session (setsid in a subshell)', async () => {
    const s = scopes.next('dfork');
    const r = await bg(s, "(setsid sh -c 'echo gc=$$; exec sleep 600' &); sleep 600");
    const gc = await printedPid(s, r.sessionId, 'gc');
    await waitFor(() => alive(gc) && readFileSync(`/proc/${gc}/cmdline`, 'latin1').startsWith('sleep'), { what: 'the grandchild to exec sleep' });
    // It really escaped: another process group, and its parent is no longer the job.
    expect(pgrpOf(gc)).not.toBe(r.pid);
    expect(markedProcesses(r.sessionId)).toContain(gc);
    const k = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(k).toMatchObject({ status: 'failed', reason: 'user' });
    expect(await waitGone([gc, r.pid], 5000)).toEqual([]);
    expect(markedProcesses(r.sessionId)).toEqual([]);
  });

  it('stops a `setsid cmd &` child the job waits for', async () => {
    const s = scopes.next('setsid');
    const r = await bg(s, 'setsid sleep 600 >/dev/null 2>&1 & echo bg=$!; wait');
    const child = await printedPid(s, r.sessionId, 'bg');
    await waitFor(() => alive(child) && pgrpOf(child) !== r.pid, { what: 'the child to leave the group' });
    await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(await waitGone([child, r.pid], 5000)).toEqual([]);
    expect(markedProcesses(r.sessionId)).toEqual([]);
  });

  it('two concurrent kills both answer with the final record', async () => {
    const s = scopes.next('twokills');
    const r = await ready(s, DEAF_JOB);
    const [a, b] = await Promise.all([
      s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 300 }),
      s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 300 }),
    ]);
    for (const k of [a, b]) {
      expect(k).toMatchObject({ sessionId: r.sessionId, status: 'failed', reason: 'user', signal: 'SIGKILL' });
      expect(typeof k.endedAt).toBe('string');
    }
    expect(a.endedAt).toBe(b.endedAt);
  });

  it('the stop record is complete as soon as the session shows as ended', async () => {
    // A second connection lists in a loop while the first kills: the first record it sees as ended
    // must already say whether SIGKILL was needed. Repeated, because a gap would be a race.
    const s = scopes.next('complete');
    const b = await d.client();
    clients.push(b);
    const watcher = new Scoped(b, s.scope);
    const seen: unknown[] = [];
    for (let i = 0; i < 30; i++) {
      const r = await bg(s, 'sleep 600');
      const watch = waitFor(
        async () => {
          const rec = (await watcher.list()).find((x) => x.sessionId === r.sessionId);
          return rec.status === 'running' ? undefined : rec;
        },
        { everyMs: 1, what: 'the session to show as ended' },
      );
      await s.process({ action: 'kill', sessionId: r.sessionId });
      seen.push((await watch).stop?.graceful);
    }
    expect(seen.filter((g) => g !== true)).toEqual([]);
  });

  it('kill on a finished session answers its final status', async () => {
    const s = scopes.next('finished');
    const done = await s.exec({ command: 'echo bye; exit 3' });
    expect(done.status).toBe('completed');
    const k = await s.process({ action: 'kill', sessionId: done.sessionId });
    expect(k).toMatchObject({ sessionId: done.sessionId, status: 'completed', exitCode: 3 });
    expect(k.reason).toBeUndefined();
    expect(k.stop).toBeUndefined();
    expect(k.text).toContain('already ended');
  });

  it('kill all:true stops every running session of its scope and no other', async () => {
    const a = scopes.next('all-a');
    const b = scopes.next('all-b');
    const a1 = await bg(a, 'sleep 600');
    const a2 = await ready(a, DEAF_JOB);
    const done = await a.exec({ command: 'true' });
    const b1 = await bg(b, 'sleep 600');
    const res = await a.process({ action: 'kill', all: true, graceMs: 300 });
    expect(res.sessions.map((x: any) => x.sessionId).sort()).toEqual([a1.sessionId, a2.sessionId].sort());
    for (const rec of res.sessions) expect(rec).toMatchObject({ status: 'failed', reason: 'user' });
    expect(res.sessions.map((x: any) => x.sessionId)).not.toContain(done.sessionId);
    expect(await waitGone([a1.pid, a2.pid], 5000)).toEqual([]);
    const other = (await b.list()).find((x) => x.sessionId === b1.sessionId);
    expect(other.status).toBe('running');
    expect(alive(b1.pid)).toBe(true);
    await b.process({ action: 'kill', sessionId: b1.sessionId });
  });

  it('kill all:true with nothing running answers an empty list', async () => {
    const s = scopes.next('all-none');
    const res = await s.process({ action: 'kill', all: true });
    expect(res.sessions).toEqual([]);
  });
});

describe('processes left after the leader exits', () => {
  it('a `setsid cmd &` left behind by a job that ended by itself is stopped shortly after', async () => {
    const s = scopes.next('straggler');
    const r = await s.exec({ command: 'setsid sleep 600 >/dev/null 2>&1 & echo bg=$!' });
    expect(r.status).toBe('completed');
    expect(r.exitCode).toBe(0);
    const pid = Number(/bg=(\d+)/.exec(r.output)![1]);
    escaped.add(pid);
    expect(await waitGone([pid], 10_000)).toEqual([]);
    expect(markedProcesses(r.sessionId)).toEqual([]);
  });
});

describe('timeouts', () => {
  it('a backgrounded session is stopped at its timeout with reason "timeout"', async () => {
    const s = scopes.next('timeout');
    const r = await bg(s, STOP_FILE_JOB, { timeout: 2 });
    const ended = await s.waitEnded(r.sessionId);
    expect(ended).toMatchObject({ status: 'failed', reason: 'timeout', exitCode: 0 });
    expect(ended.stop).toMatchObject({ reason: 'timeout' });
    expect(await stopFileSeen(s, r.sessionId)).toMatchObject({ sessionId: r.sessionId, reason: 'timeout', by: 'timeout', signal: 'SIGTERM' });
  });
});

describe('request cancellation', () => {
  it('closing the connection during a foreground exec stops its session: reason "cancelled", told through the stop file', async () => {
    const a = await d.client();
    const b = await d.client();
    clients.push(a, b);
    const s = scopes.next('disconnect', a);
    const watcher = new Scoped(b, s.scope);
    void s.request('exec', { command: STOP_FILE_JOB, yieldMs: 110_000 });
    const running = await waitFor(async () => (await watcher.list())[0], { what: 'the session to start' });
    scopes.track(running.pid);
    await watcher.waitOutput(running.sessionId, 'ready');
    a.close();
    const ended = await watcher.waitEnded(running.sessionId);
    expect(ended).toMatchObject({ status: 'failed', reason: 'cancelled' });
    expect(ended.stop).toMatchObject({ reason: 'cancelled' });
    const body = await stopFileSeen(watcher, running.sessionId);
    expect(body).toMatchObject({ sessionId: running.sessionId, reason: 'cancelled', by: 'cancelled', signal: 'SIGTERM' });
  });

  it("$/cancelRequest of an exec still waiting for its key's session to stop: refused, and its command never runs", async () => {
    const a = await d.client();
    clients.push(a);
    const s = scopes.next('cancelkey', a);
    // Ignores SIGTERM (the stop's first signal), so replacing it takes the whole grace.
    const first = await bg(s, "trap '' TERM; sleep 600", { key: 'k' });
    const marker = join(mkdtempSync(join(tmpdir(), 'procctl-cancelkey-')), 'ran');
    // Both lines in one write: the exec is waiting for the stop when the cancel is read.
    const pending = s.request('exec', { command: `touch ${marker}`, key: 'k' }, 'exec-2');
    a.sendRaw('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"exec-2"}}\n');
    const r = await within(pending, 15_000, 'the cancelled exec to answer');
    expect(r.error?.message).toMatch(/the request was cancelled before the command started; nothing ran/);
    expect(r.error?.data?.kind).toBe('unavailable');
    const sessions = await s.list();
    expect(sessions.map((x) => x.sessionId)).toEqual([first.sessionId]);
    expect(sessions[0]).toMatchObject({ status: 'failed', reason: 'replaced' });
    expect(existsSync(marker)).toBe(false);
  });

  it('$/cancelRequest of a pending poll only ends the wait; twice is harmless', async () => {
    const a = await d.client();
    clients.push(a);
    const s = scopes.next('cancelpoll', a);
    const r = await bg(s, 'sleep 600');
    const pending = s.request('process', { action: 'poll', sessionId: r.sessionId, timeout: 110_000 }, 'poll-1');
    a.sendRaw('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"poll-1"}}\n');
    a.sendRaw('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"poll-1"}}\n');
    const p = await within(pending, 15_000, 'the cancelled poll to answer');
    expect(p.error).toBeUndefined();
    expect(p.result.status).toBe('running');
    const rec = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(rec.status).toBe('running');
    expect(rec.stop).toBeUndefined();
    expect(alive(r.pid)).toBe(true);
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});

describe('the scratch directory (PROCCTL_TMPDIR)', () => {
  it('exists, private, while the session runs; clear and remove delete it', async () => {
    const s = scopes.next('tmpdir');
    const r1 = await bg(s, 'echo "dir=$PROCCTL_TMPDIR"; echo data > "$PROCCTL_TMPDIR/scratch"; sleep 600');
    const r2 = await bg(s, 'echo "dir=$PROCCTL_TMPDIR"; sleep 600');
    const dirOf = async (id: string) =>
      (await waitFor(async () => /dir=(\S+)/.exec((await s.log(id, { offset: 0 })).output), { what: 'the scratch dir in the output' }))![1];
    const dir1 = await dirOf(r1.sessionId);
    const dir2 = await dirOf(r2.sessionId);
    expect(dir1).not.toBe(dir2);
    for (const dir of [dir1, dir2]) {
      expect(statSync(dir).isDirectory()).toBe(true);
      expect(statSync(dir).mode & 0o777).toBe(0o700);
    }
    await waitFor(() => existsSync(`${dir1}/scratch`), { what: 'the job to write its scratch file' });

    await s.process({ action: 'kill', sessionId: r1.sessionId });
    await s.process({ action: 'clear', sessionId: r1.sessionId });
    expect(existsSync(dir1)).toBe(false);

    // remove of a running session: kill, then forget, scratch directory included.
    await s.process({ action: 'remove', sessionId: r2.sessionId });
    expect(existsSync(dir2)).toBe(false);
  });
});

describe('checkpoints', () => {
  it('the last checkpoint shows in list and poll; the final record keeps the newest 20', async () => {
    const s = scopes.next('checkpoint');
    const r = await bg(s, 'sleep 30');
    expect(await s.request('checkpoint', { sessionId: r.sessionId, name: 'migrated', data: { tables: 12 } })).toMatchObject({ result: {} });
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.checkpoint).toMatchObject({ name: 'migrated', data: { tables: 12 } });
    expect(Number.isNaN(Date.parse(listed.checkpoint.at))).toBe(false);
    const polled = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(polled.checkpoint).toMatchObject({ name: 'migrated', data: { tables: 12 } });
    expect(polled.text).toContain('migrated');

    for (let i = 1; i <= 25; i++) {
      const res = await s.request('checkpoint', { sessionId: r.sessionId, name: `step-${i}`, data: { i } });
      expect(res.error).toBeUndefined();
    }
    expect((await s.list()).find((x) => x.sessionId === r.sessionId).checkpoint).toMatchObject({ name: 'step-25', data: { i: 25 } });
    const k = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(k.checkpoints).toHaveLength(20);
    expect(k.checkpoints.map((x: any) => x.name)).toEqual(Array.from({ length: 20 }, (_, i) => `step-${i + 6}`));
    expect(k.checkpoint).toMatchObject({ name: 'step-25' });
    const after = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(after.checkpoints).toHaveLength(20);
  });

  it("another scope's session is not_found; a finished session is a conflict", async () => {
    const s = scopes.next('cp-own');
    const other = scopes.next('cp-other');
    const r = await bg(s, 'sleep 30');
    const err = await other.error('checkpoint', { sessionId: r.sessionId, name: 'x' });
    expect(err.data?.kind).toBe('not_found');
    const done = await s.exec({ command: 'true' });
    const err2 = await s.error('checkpoint', { sessionId: done.sessionId, name: 'x' });
    expect(err2.data?.kind).toBe('conflict');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  const cliHasCheckpoint = (() => {
    try {
      return /^\s+checkpoint\b/m.test(execFileSync(process.execPath, [PROCCTL, '--help'], { encoding: 'utf8' }));
    } catch {
      return false;
    }
  })();

  it.skipIf(!cliHasCheckpoint)('a job reports a checkpoint with `procctl checkpoint` from its own environment', async () => {
    const s = scopes.next('cp-cli');
    const r = await bg(s, `"${process.execPath}" "${PROCCTL}" checkpoint step --data '{"n":1}' && echo cp-ok; sleep 30`);
    await s.waitOutput(r.sessionId, 'cp-ok');
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed.checkpoint).toMatchObject({ name: 'step', data: { n: 1 } });
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});

describe('the signal action', () => {
  it('delivers one SIGINT to a job that traps it; the job keeps running', async () => {
    const s = scopes.next('signal');
    // `wait` on a background child: bash runs an INT trap that came while it waited for a
    // foreground child only if that child died of SIGINT too (process-actions.test.ts says more).
    const r = await bg(s, "trap 'echo got-int' INT; echo ready; while :; do sleep 0.1 & wait $!; done");
    await s.waitOutput(r.sessionId, 'ready');
    const res = await s.process({ action: 'signal', sessionId: r.sessionId, signal: 'INT' });
    expect(res).toMatchObject({ status: 'running', signal: 'SIGINT' });
    await s.waitOutput(r.sessionId, 'got-int');
    const rec = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(rec.status).toBe('running');
    expect(rec.stop).toBeUndefined();
    await s.process({ action: 'kill', sessionId: r.sessionId });
    const err = await s.error('process', { action: 'signal', sessionId: r.sessionId, signal: 'SIGINT' });
    expect(err.data?.kind).toBe('conflict');
  });
});

describe('maxSessions', () => {
  it('refuses the exec past the limit with `limit`, naming the number; finished sessions do not count', async () => {
    const small = await startDaemon({ env: { PROCCTL_MAX_SESSIONS: '2', PROCCTL_KILL_GRACE_MS: '500' } });
    const sc = await small.client();
    try {
      const s = new Scoped(sc, 'limited');
      await s.exec({ command: 'true' });
      const r1 = await s.exec({ command: 'sleep 600', background: true });
      const r2 = await s.exec({ command: 'sleep 600', background: true });
      scopes.track(r1.pid);
      scopes.track(r2.pid);
      const err = await s.error('exec', { command: 'sleep 600', background: true });
      expect(err.data?.kind).toBe('limit');
      expect(err.message).toMatch(/\b2\b/);
      expect(err.data?.maxSessions).toBe(2);
      // Another scope has its own allowance.
      const elsewhere = await new Scoped(sc, 'other').exec({ command: 'sleep 600', background: true });
      scopes.track(elsewhere.pid);
      await s.process({ action: 'kill', sessionId: r1.sessionId });
      const r3 = await s.exec({ command: 'sleep 600', background: true });
      scopes.track(r3.pid);
      expect(r3.status).toBe('running');
      await s.process({ action: 'kill', all: true });
      await new Scoped(sc, 'other').process({ action: 'kill', all: true });
    } finally {
      sc.close();
      await small.stop();
    }
  });
});
