import { beforeAll, describe, expect, it } from 'vitest';
import { alive, type TestDaemon } from '../helpers/daemon.js';
import { groupMembers } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scopes, within, type Scoped, sharedDaemon } from '../helpers/session.js';

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

  // These tests gate commands on stdin; waiting-for-input detection (SPEC §7) would turn them into
  // waiting_input after a quiet second, so it is off here and tested on its own.
sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000', PROCCTL_INTERRUPT: 'false' } }, (x) => ({ d, c, scopes } = x));

/** A session that echoes each stdin line back to stdout (`o...`) or stderr (`e...`). */
const ECHO_LINES = 'while read -r l; do case "$l" in o*) echo "$l";; e*) echo "$l" >&2;; q) exit 0;; esac; done';

async function bg(s: Scoped, command: string, extra: Record<string, unknown> = {}): Promise<any> {
  const r = await s.exec({ command, background: true, ...extra });
  expect(r.status).toBe('running');
  scopes.track(r.pid);
  return r;
}

const lines = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => String(from + i));

describe('process list', () => {
  it('lists the scope sessions newest first with their fields', async () => {
    const s = scopes.next('list');
    const first = await s.exec({ command: 'echo first; exit 4' });
    const second = await bg(s, 'sleep 600');
    const sessions = await s.list();
    expect(sessions.map((x) => x.sessionId)).toEqual([second.sessionId, first.sessionId]);
    const [running, done] = sessions;
    expect(running).toMatchObject({ status: 'running', name: 'sleep 600', command: 'sleep 600', pid: second.pid });
    expect(typeof running.cwd).toBe('string');
    expect(typeof running.startedAt).toBe('string');
    expect(typeof running.runtimeMs).toBe('number');
    expect(running.endedAt).toBeUndefined();
    expect(running.exitCode).toBeUndefined();
    expect(done).toMatchObject({ status: 'completed', exitCode: 4, truncated: false });
    expect(typeof done.endedAt).toBe('string');
    expect(done.tail).toContain('first');
    await s.process({ action: 'kill', sessionId: second.sessionId });
  });
});

describe('process poll', () => {
  it('drains only what no poll returned before', async () => {
    const s = scopes.next('drain');
    const r = await bg(s, ECHO_LINES);
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'o-one\n' });
    await s.waitOutput(r.sessionId, 'o-one');
    const p1 = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p1.status).toBe('running');
    expect(p1.output).toBe('o-one\n');
    const p2 = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p2.output).toBe('');
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'o-two\n' });
    await s.waitOutput(r.sessionId, 'o-two');
    const p3 = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p3.output).toBe('o-two\n');
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'q\n' });
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(output).toBe('');
  });

  it('interleaves stdout and stderr in arrival order', async () => {
    const s = scopes.next('inter');
    const r = await bg(s, ECHO_LINES);
    for (const l of ['o1', 'e2', 'o3', 'e4', 'e5', 'o6']) {
      await s.process({ action: 'write', sessionId: r.sessionId, data: `${l}\n` });
      await s.waitOutput(r.sessionId, l);
    }
    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.output).toBe('o1\ne2\no3\ne4\ne5\no6\n');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('with timeout on a quiet session, answers with no output and retryInMs while running', async () => {
    const s = scopes.next('wait');
    const r = await bg(s, 'sleep 600');
    const p = await s.process({ action: 'poll', sessionId: r.sessionId, timeout: 300 });
    expect(p.status).toBe('running');
    expect(p.output).toBe('');
    expect(p.retryInMs).toBeGreaterThan(0);
    expect(p.text).toContain('(no new output)');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('with timeout, waits for new output and returns as soon as it comes', async () => {
    const s = scopes.next('early');
    const r = await bg(s, ECHO_LINES);
    const pending = s.process({ action: 'poll', sessionId: r.sessionId, timeout: 110_000 });
    // Let the poll start waiting before the output arrives (either order must work).
    await s.process({ action: 'list' });
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'o-wake\n' });
    // The poll was waiting before the output existed, so getting it proves it waited and woke.
    const p = await within(pending, 20_000, 'poll to return on new output');
    expect(p.output).toBe('o-wake\n');
    expect(p.status).toBe('running');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('with timeout, returns early when the session exits', async () => {
    const s = scopes.next('exitwait');
    const r = await bg(s, 'read x; exit 5');
    const pending = s.process({ action: 'poll', sessionId: r.sessionId, timeout: 110_000 });
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    let p = await within(pending, 20_000, 'poll to return on exit');
    if (p.status === 'running') p = (await s.pollUntilEnded(r.sessionId)).last;
    expect(p.status).toBe('completed');
    expect(p.exitCode).toBe(5);
  });

  it('on a finished session returns what was never drained, then the exit line', async () => {
    const s = scopes.next('fin');
    const r = await s.exec({ command: 'echo a; echo b >&2; echo c; exit 4' });
    expect(r.status).toBe('completed');
    const p1 = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p1.status).toBe('completed');
    expect(p1.exitCode).toBe(4);
    expect(p1.output.split('\n').sort()).toEqual(['', 'a', 'b', 'c']);
    expect(p1.text).toContain('Process exited with code 4');
    expect(p1.retryInMs).toBeUndefined();
    const p2 = await s.process({ action: 'poll', sessionId: r.sessionId, timeout: 5000 });
    expect(p2.output).toBe('');
    expect(p2.text).toContain('Process exited with code 4');
  });

  it('says the signal for a session that a signal ended', async () => {
    const s = scopes.next('finsig');
    const r = await s.exec({ command: 'kill -TERM $$' });
    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.signal).toBe('SIGTERM');
    expect(p.text).toContain('Process exited with signal SIGTERM');
  });
});

describe('process log', () => {
  it('says which characters of a page came on stderr', async () => {
    const s = scopes.next('log-streams');
    const r = await s.exec({ command: 'echo out-1; echo err-1 >&2; sleep 0.1; echo out-2; sleep 0.1; echo err-2 >&2' });
    expect(r.status).toBe('completed');
    const all = await s.process({ action: 'log', sessionId: r.sessionId });
    expect(all.output).toBe('out-1\nerr-1\nout-2\nerr-2');
    const marked = (page: { output: string; stderr?: [number, number][] }) => (page.stderr ?? []).map(([a, b]) => page.output.slice(a, b));
    expect(marked(all)).toEqual(['err-1\n', 'err-2']);
    const second = await s.process({ action: 'log', sessionId: r.sessionId, offset: 1, limit: 2 });
    expect(second.output).toBe('err-1\nout-2');
    expect(marked(second)).toEqual(['err-1\n']);
    const third = await s.process({ action: 'log', sessionId: r.sessionId, offset: 2, limit: 1 });
    expect(third.stderr).toBeUndefined();
  });

  let s: Scoped;
  let id: string;
  let all: string[];

  beforeAll(async () => {
    s = scopes.next('log');
    const r = await s.exec({ command: 'seq 1 250' });
    expect(r.status).toBe('completed');
    id = r.sessionId;
    all = lines(1, 250);
  });

  it('neither offset nor limit: the last 200 lines, the hint in text only', async () => {
    const r = await s.log(id);
    expect(r.output).toBe(all.slice(50).join('\n'));
    expect(r.output).not.toContain('[showing');
    expect(r.text).toContain('[showing last 200 of 250 lines; pass offset/limit to page]');
    expect(r.totalLines).toBe(250);
    expect(r.totalChars).toBe(`${all.join('\n')}\n`.length);
    expect(r.truncated).toBe(false);
  });

  it('limit only: the last L lines', async () => {
    const r = await s.log(id, { limit: 5 });
    expect(r.output).toBe('246\n247\n248\n249\n250');
    expect(r.text).not.toContain('[showing');
  });

  it('offset only: line O (0-based) to the end', async () => {
    const r = await s.log(id, { offset: 245 });
    expect(r.output).toBe('246\n247\n248\n249\n250');
  });

  it('offset and limit: lines [O, O+L)', async () => {
    const r = await s.log(id, { offset: 10, limit: 3 });
    expect(r.output).toBe('11\n12\n13');
    expect(r.totalLines).toBe(250);
  });

  it('no hint when everything fits, and log never drains', async () => {
    const t = scopes.next('log2');
    const r = await t.exec({ command: 'printf "x\\ny\\nz\\n"' });
    const l = await t.log(r.sessionId);
    expect(l.output).toBe('x\ny\nz');
    expect(l.text).not.toContain('[showing');
    expect(l.totalLines).toBe(3);
    const p = await t.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.output).toBe('x\ny\nz\n');
  });
});

describe('process write', () => {
  it('writes to cat and closes its stdin with eof', async () => {
    const s = scopes.next('cat');
    const r = await bg(s, 'cat');
    const w1 = await s.process({ action: 'write', sessionId: r.sessionId, data: 'hello\n' });
    expect(w1.bytes).toBe(6);
    await s.waitOutput(r.sessionId, 'hello');
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'bye €\n', eof: true });
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(last.exitCode).toBe(0);
    expect(output).toBe('hello\nbye €\n');
  });

  it('delivers a large write whole, even to a job that reads it slowly', async () => {
    const s = scopes.next('bigwrite');
    const r = await bg(s, 'sleep 0.5; wc -c');
    const data = `${'0123456789abcdef'.repeat(32 * 1024)}`;
    await s.process({ action: 'write', sessionId: r.sessionId, data, eof: true });
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(output.trim()).toBe(String(data.length));
  });

  it('refuses a write to a finished session as conflict', async () => {
    const s = scopes.next('wfin');
    const r = await s.exec({ command: 'true' });
    const e = await s.error('process', { action: 'write', sessionId: r.sessionId, data: 'x' });
    expect(e.data.kind).toBe('conflict');
  });

  it('refuses a write to a stdin "null" session as conflict', async () => {
    const s = scopes.next('wnull');
    const r = await bg(s, 'sleep 600', { stdin: 'null' });
    const e = await s.error('process', { action: 'write', sessionId: r.sessionId, data: 'x' });
    expect(e.data.kind).toBe('conflict');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('refuses a write after eof as conflict', async () => {
    const s = scopes.next('weof');
    const r = await bg(s, 'sleep 600');
    await s.process({ action: 'write', sessionId: r.sessionId, eof: true });
    const e = await s.error('process', { action: 'write', sessionId: r.sessionId, data: 'x' });
    expect(e.data.kind).toBe('conflict');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});

describe('process kill', () => {
  it('answers once the session has ended: failed, reason user, and the whole group is gone', async () => {
    const s = scopes.next('kill');
    const r = await bg(s, 'sleep 600 & echo "child=$!"; sleep 600');
    await s.waitOutput(r.sessionId, 'child=');
    const child = Number((await s.log(r.sessionId)).output.trim().replace('child=', ''));
    scopes.track(child);
    expect(alive(child)).toBe(true);
    const k = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(k.status).toBe('failed');
    expect(k.reason).toBe('user');
    expect(k.sessionId).toBe(r.sessionId);
    expect(typeof k.endedAt).toBe('string');
    expect(alive(r.pid)).toBe(false);
    expect(alive(child)).toBe(false);
    expect(groupMembers(r.pid)).toEqual([]);
  });

  it('writes the stop file (JSON) before it signals the group', async () => {
    const s = scopes.next('stopfile');
    const r = await bg(s, `trap 'echo "stop=$(cat "$PROCCTL_STOP_FILE")"; exit 0' TERM; echo ready; while :; do sleep 0.1; done`);
    await s.waitOutput(r.sessionId, 'ready');
    const k = await s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 10_000 });
    expect(k.status).toBe('failed');
    expect(k.reason).toBe('user');
    expect(k.exitCode).toBe(0);
    const line = (await s.log(r.sessionId)).output.split('\n').find((l: string) => l.startsWith('stop='));
    expect(line, 'the trap saw the stop file').toBeDefined();
    const body = JSON.parse(line!.slice('stop='.length));
    expect(body).toMatchObject({ sessionId: r.sessionId, reason: 'user', signal: 'SIGTERM' });
    expect(typeof body.timestamp).not.toBe('undefined');
  });

  it('also stops a descendant that left the process group (setsid)', async () => {
    const s = scopes.next('killesc');
    const r = await bg(s, 'setsid sleep 600 & echo "child=$!"; sleep 600');
    await s.waitOutput(r.sessionId, 'child=');
    const child = Number((await s.log(r.sessionId)).output.trim().replace('child=', ''));
    scopes.track(child);
    expect(alive(child)).toBe(true);
    const k = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(k.status).toBe('failed');
    expect(alive(child)).toBe(false);
  });

  it('of a finished session answers its final status', async () => {
    const s = scopes.next('killfin');
    const r = await s.exec({ command: 'echo done; exit 6' });
    const k = await s.process({ action: 'kill', sessionId: r.sessionId });
    expect(k.status).toBe('completed');
    expect(k.exitCode).toBe(6);
    expect(k.reason).toBeUndefined();
  });

  it('two concurrent kills both answer with the final status', async () => {
    const s = scopes.next('kill2');
    const r = await bg(s, 'trap "" TERM; echo ready; sleep 600');
    await s.waitOutput(r.sessionId, 'ready');
    const [a, b] = await within(
      Promise.all([
        s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 300 }),
        s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 300 }),
      ]),
      15_000,
      'both kills to answer',
    );
    for (const k of [a, b]) {
      expect(k.status).toBe('failed');
      expect(k.reason).toBe('user');
    }
    expect(groupMembers(r.pid)).toEqual([]);
  });

  it('sends the given signal; a job that handles it ends by itself before the grace', async () => {
    const s = scopes.next('sigint');
    // `wait` on a child in the background, not a foreground `sleep`: bash acts on a SIGINT that
    // came while it waited for a foreground child only if that child died of it too, and a sleep
    // that ended just before the signal reached it (a loaded machine) left the trap unrun.
    const r = await bg(s, "trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.1 & wait $!; done");
    await s.waitOutput(r.sessionId, 'ready');
    const k = await within(s.process({ action: 'kill', sessionId: r.sessionId, signal: 'SIGINT', graceMs: 10_000 }), 9000, 'kill');
    expect(k.status).toBe('failed');
    expect(k.reason).toBe('user');
    expect(k.exitCode).toBe(7);
    expect(k.signal).toBeNull();
    expect((await s.log(r.sessionId)).output).toContain('got-int');
  });

  it('escalates to SIGKILL after graceMs for a job that ignores the signal', async () => {
    const s = scopes.next('grace');
    const r = await bg(s, 'trap "" TERM; echo ready; sleep 600');
    await s.waitOutput(r.sessionId, 'ready');
    const k = await within(s.process({ action: 'kill', sessionId: r.sessionId, graceMs: 200 }), 10_000, 'kill');
    expect(k.status).toBe('failed');
    expect(k.reason).toBe('user');
    expect(k.signal).toBe('SIGKILL');
    expect(groupMembers(r.pid)).toEqual([]);
  });

  it('all:true stops every running session of the scope and only those', async () => {
    const s = scopes.next('all');
    const other = scopes.next('all-other');
    const finished = await s.exec({ command: 'true' });
    const running = [await bg(s, 'sleep 600'), await bg(s, 'sleep 600'), await bg(s, 'sleep 600 & wait')];
    const spared = await bg(other, 'sleep 600');
    const k = await s.process({ action: 'kill', all: true });
    expect(k.sessions.map((x: any) => x.sessionId).sort()).toEqual(running.map((x) => x.sessionId).sort());
    for (const x of k.sessions) {
      expect(x.status).toBe('failed');
      expect(x.reason).toBe('user');
    }
    for (const x of running) expect(groupMembers(x.pid)).toEqual([]);
    const listed = await s.list();
    expect(listed.find((x) => x.sessionId === finished.sessionId).status).toBe('completed');
    expect(listed.filter((x) => x.status === 'running')).toEqual([]);
    expect((await other.list())[0].status).toBe('running');
    expect(alive(spared.pid)).toBe(true);
    await other.process({ action: 'kill', sessionId: spared.sessionId });
  });
});

describe('process clear and remove', () => {
  it('clear forgets a finished session', async () => {
    const s = scopes.next('clear');
    const r = await s.exec({ command: 'echo x' });
    const cl = await s.process({ action: 'clear', sessionId: r.sessionId });
    expect(cl.sessionId).toBe(r.sessionId);
    expect(await s.list()).toEqual([]);
    const e = await s.error('process', { action: 'poll', sessionId: r.sessionId });
    expect(e.data.kind).toBe('not_found');
  });

  it('clear of a running session is not_found and leaves it running', async () => {
    const s = scopes.next('clear2');
    const r = await bg(s, 'sleep 600');
    const e = await s.error('process', { action: 'clear', sessionId: r.sessionId });
    expect(e.data.kind).toBe('not_found');
    expect((await s.list())[0].status).toBe('running');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('remove kills a running session and forgets it', async () => {
    const s = scopes.next('remove');
    const r = await bg(s, 'sleep 600 & wait');
    const rm = await s.process({ action: 'remove', sessionId: r.sessionId });
    expect(rm.status).toBe('failed');
    expect(rm.reason).toBe('user');
    expect(groupMembers(r.pid)).toEqual([]);
    expect(alive(r.pid)).toBe(false);
    expect(await s.list()).toEqual([]);
    const e = await s.error('process', { action: 'log', sessionId: r.sessionId });
    expect(e.data.kind).toBe('not_found');
  });
});

describe('process errors', () => {
  it('an unknown action is -32602 invalid and lists the actions', async () => {
    const s = scopes.next('err');
    const e = await s.error('process', { action: 'explode', sessionId: 'x' });
    expect(e.code).toBe(-32602);
    expect(e.data.kind).toBe('invalid');
    expect(e.data.path).toEqual(['action']);
    for (const a of ['list', 'poll', 'log', 'write', 'kill', 'clear', 'remove']) expect(e.message).toContain(a);
  });

  it.each(['poll', 'log', 'write', 'kill', 'clear', 'remove'])('%s without sessionId is invalid with its path', async (action) => {
    const s = scopes.next('err');
    const e = await s.error('process', { action, data: 'x' });
    expect(e.data.kind).toBe('invalid');
    expect(e.data.path).toEqual(['sessionId']);
  });

  it.each(['poll', 'log', 'write', 'kill', 'clear', 'remove'])('%s of an unknown session is not_found', async (action) => {
    const s = scopes.next('err');
    const e = await s.error('process', { action, sessionId: 'nosuchsession', data: 'x' });
    expect(e.data.kind).toBe('not_found');
    expect(e.code).toBeGreaterThanOrEqual(-32099);
    expect(e.code).toBeLessThanOrEqual(-32000);
  });

  it('an unknown signal is invalid', async () => {
    const s = scopes.next('err');
    const r = await bg(s, 'sleep 600');
    const e = await s.error('process', { action: 'kill', sessionId: r.sessionId, signal: 'SIGBOGUS' });
    expect(e.data.kind).toBe('invalid');
    expect(e.data.path).toEqual(['signal']);
    expect(alive(r.pid)).toBe(true);
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});
