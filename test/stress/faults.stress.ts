import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { once } from 'node:events';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { groupMembers, waitGone } from '../helpers/procs.js';
import type { TestClient } from '../helpers/rpc.js';
import { Scoped, sharedDaemon, within, type Scopes } from '../helpers/session.js';
import { keepChecking, otherClientWorks, sayIfDaemonDies } from './bystander.js';

/**
 * Faults from outside (SPEC §5, §9, §4): processes killed behind the daemon's back, a working
 * directory deleted under a job, a subscriber that never reads, clients that vanish mid-poll.
 * Each is answered correctly, nothing is left running, and a client on another connection is
 * served correctly during and after.
 */

/** Output pushed at a subscriber that never reads. */
const FLOOD_BYTES = 192 * 1024 * 1024;
/** How much a client that never reads its answers may make the daemon grow. */
const GREEDY_BOUND = 128 * 1024 * 1024;
/** Requests it sends: held without a bound, their answers make the daemon grow by about 500 MiB. */
const GREEDY_REQUESTS = 1_000;

let d: TestDaemon;
let scopes: Scopes;
let other: TestClient;
let bystander: Scoped;

sharedDaemon(
  { env: { PROCCTL_INTERRUPT: 'false', PROCCTL_KILL_GRACE_MS: '1000', PROCCTL_MAX_LOG_BYTES: String(1024 * 1024) } },
  (x) => {
    ({ d, scopes } = x);
    sayIfDaemonDies(d);
  },
);

beforeAll(async () => {
  other = await d.client();
  bystander = scopes.next('bystander', other);
});

afterAll(() => other?.close());

/** The daemon's resident memory, in bytes. */
function rss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : 0;
}

describe('faults', () => {
  it.each([
    ['its leader', (pid: number) => process.kill(pid, 'SIGKILL')],
    ['its whole process group', (pid: number) => process.kill(-pid, 'SIGKILL')],
  ])('kill -9 of %s from outside: the session ends failed with SIGKILL, nothing is left', async (_what, kill) => {
    const s = scopes.next('kill9');
    // One child ignores SIGTERM: what the leader leaves behind must still go (grace, then SIGKILL).
    const r = await s.exec({ command: "sleep 300 & (trap '' TERM; exec sleep 301) & echo started; wait", background: true });
    scopes.track(r.pid);
    await s.waitOutput(r.sessionId, 'started');
    await waitFor(() => groupMembers(r.pid).length >= 3, { what: 'the group to hold three processes' });
    const members = groupMembers(r.pid);
    kill(r.pid);
    const [ended] = await Promise.all([s.waitEnded(r.sessionId, 30_000), otherClientWorks(bystander)]);
    expect(ended).toMatchObject({ status: 'failed', signal: 'SIGKILL', reason: 'signal' });
    expect(ended.exitCode ?? null).toBeNull();
    expect(await waitGone([r.pid, ...members], 15_000)).toEqual([]);
    const poll = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(poll).toMatchObject({ status: 'failed', signal: 'SIGKILL' });
    expect(poll.text).toContain('SIGKILL');
    await s.process({ action: 'clear', sessionId: r.sessionId });
    await otherClientWorks(bystander);
  });

  it('a workdir deleted under a running job: the job runs on; exec into it afterwards is invalid', async () => {
    const s = scopes.next('workdir');
    const wd = mkdtempSync(join(tmpdir(), 'procctl-wd-'));
    const r = await s.exec({ command: 'echo "in $PWD"; read x; echo after; ls >/dev/null 2>&1; echo "ls=$?"', workdir: wd, background: true });
    scopes.track(r.pid);
    await s.waitOutput(r.sessionId, 'in ');
    rmSync(wd, { recursive: true, force: true });
    await otherClientWorks(bystander);
    const listed = (await s.list()).find((x) => x.sessionId === r.sessionId);
    expect(listed).toMatchObject({ status: 'running', cwd: wd });
    await s.process({ action: 'write', sessionId: r.sessionId, data: '\n' });
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(output).toContain(`in ${wd}\nafter\nls=`);

    const err = await s.error('exec', { command: 'echo should-not-run', workdir: wd });
    expect(err.data).toMatchObject({ kind: 'invalid', path: ['workdir'] });
    expect((await s.list()).map((x) => x.sessionId)).toEqual([r.sessionId]);
    await s.process({ action: 'clear', sessionId: r.sessionId });
    await otherClientWorks(bystander);
  });

  it('a job that deletes its own scratch dir (PROCCTL_TMPDIR, where the stop file goes) can still be killed and cleared', async () => {
    const s = scopes.next('scratch');
    const r = await s.exec({ command: 'rm -rf "$PROCCTL_TMPDIR"; echo gone; sleep 300', background: true });
    scopes.track(r.pid);
    await s.waitOutput(r.sessionId, 'gone');
    const k = await within(s.process({ action: 'kill', sessionId: r.sessionId }), 20_000, 'kill');
    expect(k).toMatchObject({ status: 'failed', signal: 'SIGTERM', reason: 'user' });
    expect(await waitGone([r.pid])).toEqual([]);
    expect((await s.process({ action: 'clear', sessionId: r.sessionId })).sessionId).toBe(r.sessionId);
    expect(await s.list()).toEqual([]);
    await otherClientWorks(bystander);
  });

  it('a subscriber that never reads: the daemon keeps serving, its memory stays bounded, the subscriber is told what it missed', async () => {
    const s = scopes.next('flood');
    const lazy = await d.client();
    try {
      const sub = await new Scoped(lazy, s.scope).request('subscribe', { events: ['output'] });
      expect(sub.error).toBeUndefined();
      // From here on the subscriber reads nothing: the kernel's buffers fill, then the daemon's.
      lazy.socket.pause();
      const before = rss(d.proc.pid!);
      let peak = before;
      let ended = false;
      const sampler = setInterval(() => (peak = Math.max(peak, rss(d.proc.pid!))), 50);
      const r = await s.exec({ command: `head -c ${FLOOD_BYTES} /dev/zero | tr '\\0' x`, background: true });
      scopes.track(r.pid);
      const checking = keepChecking(bystander, () => ended);
      const done = await s.waitEnded(r.sessionId, 180_000).finally(() => {
        ended = true;
        clearInterval(sampler);
      });
      const rounds = await within(checking, 60_000, 'the other client to finish its round');
      expect(done).toMatchObject({ status: 'completed', exitCode: 0 });
      const poll = await s.process({ action: 'poll', sessionId: r.sessionId });
      expect(poll.output.length + poll.droppedChars.stdout).toBe(FLOOD_BYTES);
      const grew = peak - before;
      console.log(`flood: ${FLOOD_BYTES >> 20} MiB to a subscriber that never read; daemon RSS grew ${(grew / 2 ** 20).toFixed(0)} MiB at most; the other client did ${rounds} rounds meanwhile`);
      // Unbounded buffering would hold about the whole flood as JSON text (192 MiB and more). Bounded,
      // the daemon holds at most 16 MiB of unsent events for it, and the rest of what RSS shows is
      // the heap's churn over 192 MiB of output: 60-66 MiB measured, so half the flood tells the two apart.
      expect(grew).toBeLessThan(FLOOD_BYTES / 2);

      // Reading again, it gets what was buffered and then a count of what was dropped.
      lazy.socket.resume();
      await lazy.until(() => lazy.notifications.some((n) => n.params?.type === 'dropped'), 60_000);
      const dropped = lazy.notifications.find((n) => n.params?.type === 'dropped');
      expect(dropped.params.count).toBeGreaterThan(0);
      const outputs = lazy.notifications.filter((n) => n.params?.type === 'output');
      expect(outputs.length).toBeGreaterThan(0);
      expect(outputs[0].params.offset).toBe(0);
      for (let i = 1; i < outputs.length; i++) expect(outputs[i].params.offset).toBeGreaterThan(outputs[i - 1].params.offset);
      await s.process({ action: 'clear', sessionId: r.sessionId });
    } finally {
      lazy.close();
    }
    await otherClientWorks(bystander);
  });

  it('a client that sends requests and never reads the answers: the daemon stops reading it instead of growing, and answers everything once it reads', async () => {
    const s = scopes.next('greedy');
    // 190 lines of 999 digits: each `log` of them answers about 380 kB (the lines twice, in
    // output and text) to a request of about 150 bytes.
    const lines = 190;
    const made = await s.exec({ command: `for i in $(seq ${lines}); do printf '%0999d\\n' 0; done`, yieldMs: 20_000 });
    expect(made.status).toBe('completed');
    const greedy = connect(d.socket);
    await once(greedy, 'connect');
    let rest = '';
    const results = new Map<unknown, any>();
    greedy.setEncoding('utf8');
    greedy.on('data', (chunk: string) => {
      rest += chunk;
      for (let nl = rest.indexOf('\n'); nl !== -1; nl = rest.indexOf('\n')) {
        const line = rest.slice(0, nl);
        rest = rest.slice(nl + 1);
        if (!line.trim()) continue;
        const m = JSON.parse(line);
        // Keep only what is checked: a whole answer set would be hundreds of MB here.
        results.set(m.id, m.error ?? { status: m.result.status, output: m.result.output?.length ?? m.result.output, sessionId: m.result.sessionId });
      }
    });
    // From here on it reads nothing until told: the kernel's buffers fill, then the daemon's.
    greedy.pause();
    try {
      const before = rss(d.proc.pid!);
      let peak = before;
      const sampler = setInterval(() => (peak = Math.max(peak, rss(d.proc.pid!))), 20);
      const req = (id: number, method: string, params: object) => `${JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, scope: s.scope } })}\n`;
      const logLine = (id: number) => req(id, 'process', { action: 'log', sessionId: made.sessionId });
      greedy.write(Array.from({ length: GREEDY_REQUESTS }, (_, i) => logLine(i + 1)).join(''));
      // Last, an exec another connection can see start: it starts only once every log before it has.
      greedy.write(req(0, 'exec', { command: 'echo marker' }));
      const markerStarted = async () => (await s.list()).length > 1;
      // Watch while another client is served; a daemon that reads on would start the marker soon.
      let rounds = 0;
      try {
        for (; rounds < 20 && peak - before < GREEDY_BOUND && !(await markerStarted()); rounds++) await otherClientWorks(bystander);
        peak = Math.max(peak, rss(d.proc.pid!));
      } finally {
        clearInterval(sampler);
      }
      console.log(`greedy client: ${GREEDY_REQUESTS} answers of ${lines * 2} kB unread; daemon RSS grew ${((peak - before) / 2 ** 20).toFixed(0)} MiB; the other client did ${rounds} rounds meanwhile`);
      expect(peak - before).toBeLessThan(GREEDY_BOUND);
      // Held, not dropped: the requests past the bound have not started.
      expect(await markerStarted()).toBe(false);

      // Once it reads, every request is answered, in full.
      greedy.resume();
      await waitFor(() => results.size === GREEDY_REQUESTS + 1, { timeoutMs: 120_000, what: `${GREEDY_REQUESTS + 1} answers to the greedy client` });
      for (let id = 1; id <= GREEDY_REQUESTS; id++) expect(results.get(id)).toEqual({ status: 'completed', output: lines * 1000 - 1, sessionId: made.sessionId });
      expect(results.get(0)).toMatchObject({ status: 'completed' });
      await s.process({ action: 'clear', sessionId: results.get(0).sessionId });
      await s.process({ action: 'clear', sessionId: made.sessionId });
    } finally {
      greedy.destroy();
    }
    await otherClientWorks(bystander);
  });

  it('clients that vanish mid-poll: the daemon keeps serving, the session and its output are unaffected', async () => {
    const s = scopes.next('vanish');
    const r = await s.exec({ command: 'cat', background: true });
    scopes.track(r.pid);
    const ghosts = await Promise.all(Array.from({ length: 20 }, () => d.client()));
    for (const g of ghosts) {
      const gs = new Scoped(g, s.scope);
      void gs.request('process', { action: 'poll', sessionId: r.sessionId, timeout: 100_000 });
      // Answered while the poll waits: the poll has reached the daemon.
      expect((await gs.request('daemon.status')).result.pid).toBe(d.proc.pid);
    }
    for (const g of ghosts) g.close();
    // Let the daemon see the connections go (a few round trips on another one).
    for (let i = 0; i < 5; i++) await s.request('daemon.status');
    await otherClientWorks(bystander);
    expect((await s.list())[0]).toMatchObject({ sessionId: r.sessionId, status: 'running' });
    expect(alive(r.pid)).toBe(true);

    await s.process({ action: 'write', sessionId: r.sessionId, data: 'after the ghosts\n' });
    const p = await s.process({ action: 'poll', sessionId: r.sessionId, timeout: 20_000 });
    expect(p.output).toBe('after the ghosts\n');
    await s.process({ action: 'write', sessionId: r.sessionId, eof: true });
    const { last } = await s.pollUntilEnded(r.sessionId);
    expect(last).toMatchObject({ status: 'completed', exitCode: 0 });
    expect((await s.log(r.sessionId)).output).toBe('after the ghosts');
    await s.process({ action: 'clear', sessionId: r.sessionId });
    await otherClientWorks(bystander);
  });
});
