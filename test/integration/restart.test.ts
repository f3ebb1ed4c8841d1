import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { packageCopy, removePackageCopies, setVersion } from '../helpers/package-copy.js';
import { daemonStatus, operator, restartAndWait } from '../helpers/restart.js';
import { killLeftovers } from '../helpers/procs.js';
import { guardianOf } from '../helpers/state.js';
import { TestClient } from '../helpers/rpc.js';
import { Scoped, within } from '../helpers/session.js';
import { cliOn } from '../cli/run.js';

/**
 * Jobs outlive the daemon's image (SPEC §19): a planned restart hands every running session to a
 * new image in the same PID, the socket never refuses, and a refusal leaves the old image serving.
 * Everything here is real: a daemon re-executing itself, a copy of the package with another
 * version, a counter that must keep every number exactly once.
 */

const pids = new Set<number>();

/** The zombie children of `pid` (exited, not reaped). */
function zombiesOf(pid: number): number[] {
  const children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return children.filter((c) => {
    try {
      const stat = readFileSync(`/proc/${c}/stat`, 'latin1');
      return stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z';
    } catch {
      return false;
    }
  });
}

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

afterAll(() => {
  removePackageCopies();
});

/** A counter printing every 10 ms, `n` numbers. */
const counter = (n: number) => `i=0; while [ $i -lt ${n} ]; do echo $i; i=$((i+1)); sleep 0.01; done`;

/**
 * The counter, then a wait for a line of input (not echoed on a terminal): it runs until the test
 * lets it end (`release`), however long a loaded machine takes to restart, and is always there to hand over.
 */
const heldCounter = (n: number) => `stty -echo 2>/dev/null; ${counter(n)}; read -r _`;
const release = (s: Scoped, id: string) => s.process({ action: 'write', sessionId: id, data: '\n' });

function expectEveryNumberOnce(output: string, n: number): void {
  const lines = output.split('\n').filter((l) => l !== '');
  expect(lines.length).toBe(n);
  for (let i = 0; i < n; i++) if (lines[i] !== String(i)) throw new Error(`line ${i} is ${JSON.stringify(lines[i])}: a number was lost or doubled`);
}

describe('planned restart (SPEC §19)', () => {
  it('a counter keeps every number exactly once, its pid and input; the daemon keeps its PID; new work runs after', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'restart');
    const n = 300;
    const count = await s.exec({ command: heldCounter(n), background: true });
    pids.add(count.pid);
    const cat = await s.exec({ command: 'cat', background: true });
    pids.add(cat.pid);
    await s.process({ action: 'write', sessionId: cat.sessionId, data: 'before\n' });
    await s.waitOutput(count.sessionId, '\n20\n');
    const answer = await restartAndWait(d);
    expect(answer.sessions).toBe(2);
    const after = await daemonStatus(d);
    expect(after.pid).toBe(d.proc.pid);
    expect(after.restarts).toMatchObject({ planned: 1, crash: 0, adopted: 2, lost: 0 });
    expect(after.restarts.lastMs).toBeGreaterThanOrEqual(0);

    const s2 = new Scoped(await d.client(), 'restart');
    await s2.process({ action: 'write', sessionId: cat.sessionId, data: 'after\n' });
    await s2.waitOutput(cat.sessionId, 'after');
    await release(s2, count.sessionId);
    const { last } = await s2.pollUntilEnded(count.sessionId, 30_000);
    expect(last.status).toBe('completed');
    expect(last.exitCode).toBe(0);
    expectEveryNumberOnce((await s2.log(count.sessionId, { offset: 0, limit: 1000 })).output, n);
    expect((await s2.list()).find((x: any) => x.sessionId === cat.sessionId).tail).toBe('before\nafter\n');
    // The session that was running is still the same process.
    const listed = (await s2.list()).find((x: any) => x.sessionId === cat.sessionId);
    expect(listed.pid).toBe(cat.pid);
    expect(['running', 'waiting_input']).toContain(listed.status);
    // Normal use goes on: a new command, and a kill of an adopted one.
    const fresh = await s2.exec({ command: 'echo fresh' });
    expect(fresh.output).toBe('fresh\n');
    await s2.process({ action: 'kill', sessionId: cat.sessionId });
    await waitFor(() => !alive(cat.pid), { what: 'the adopted cat to be stopped' });
  });

  it('a terminal session keeps every number across two restarts, takes input, send-keys and a resize after them, and ends with its own exit code', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'pty');
    const n = 300;
    const count = await s.exec({ command: heldCounter(n), background: true, pty: true });
    pids.add(count.pid);
    // Reads lines, says each with the terminal's size; ends with 3 at end of input (^D).
    const shell = await s.exec({ command: 'stty -echo; while read l; do echo "got:$l size:$(stty size)"; done; exit 3', background: true, pty: true });
    pids.add(shell.pid);
    await s.process({ action: 'write', sessionId: shell.sessionId, data: 'before\n' });
    await s.waitOutput(shell.sessionId, 'got:before size:30 120');
    await s.waitOutput(count.sessionId, '\n20\r\n');
    const answer = await restartAndWait(d);
    expect(answer.sessions).toBe(2);
    expect((await daemonStatus(d)).restarts).toMatchObject({ planned: 1, adopted: 2, lost: 0 });

    let s2 = new Scoped(await d.client(), 'pty');
    const listed = (await s2.list()).find((x: any) => x.sessionId === shell.sessionId);
    expect(listed.pid).toBe(shell.pid);
    await s2.process({ action: 'resize', sessionId: shell.sessionId, cols: 100, rows: 40 });
    await s2.process({ action: 'write', sessionId: shell.sessionId, data: 'after\n' });
    await s2.waitOutput(shell.sessionId, 'got:after size:40 100');
    // Again: a terminal this image adopted is handed on as well.
    expect((await restartAndWait(d, 1)).sessions).toBe(2);
    s2 = new Scoped(await d.client(), 'pty');
    await s2.process({ action: 'send-keys', sessionId: shell.sessionId, keys: ['k', 'e', 'y', 'Enter'] });
    await s2.waitOutput(shell.sessionId, 'got:key size:40 100');
    await s2.process({ action: 'send-keys', sessionId: shell.sessionId, keys: ['C-d'] });
    const ended = await s2.pollUntilEnded(shell.sessionId, 30_000);
    expect(ended.last.status).toBe('completed');
    expect(ended.last.exitCode).toBe(3);

    await release(s2, count.sessionId);
    const { last } = await s2.pollUntilEnded(count.sessionId, 30_000);
    expect(last.status).toBe('completed');
    expect(last.exitCode).toBe(0);
    expectEveryNumberOnce((await s2.log(count.sessionId, { offset: 0, limit: 1000 })).output.replaceAll('\r', ''), n);
    // Two restarts, each two image start-ups: on a loaded machine that alone can pass the default minute.
  }, 180_000);

  it('procctl daemon restart hands over, waits for the new image and says what it kept', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'cli');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    const r = await cliOn(d.socket)(['daemon', 'restart']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/Handing 1 running session to a new daemon image/);
    expect(r.stdout).toMatch(/serves again after \d+ ms: 1 session kept\./);
    const s2 = new Scoped(await d.client(), 'cli');
    expect((await s2.list()).find((x: any) => x.sessionId === job.sessionId).status).toBe('running');
  });

  it('the socket never refuses: a client connecting in a loop through the hand-over is always answered', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'hammer');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    let stop = false;
    const failures: string[] = [];
    let answered = 0;
    // A connection left without an answer is a failure said with when it was made, not a hang of the loop.
    const hammer = (async () => {
      while (!stop) {
        const at = new Date().toISOString();
        try {
          const c = await within(TestClient.connect(d.socket), 10_000, `a connection made at ${at}`);
          const r = await within(c.request('daemon.status'), 10_000, `an answer to daemon.status on a connection made at ${at}`);
          c.close();
          if (r.result) answered++;
        } catch (err) {
          failures.push((err as Error).message);
        }
      }
    })();
    await waitFor(() => answered > 5, { what: 'the hammer to get going' });
    await restartAndWait(d);
    const at = answered;
    await waitFor(() => answered > at + 5 || failures.length > 0, { what: 'answers after the restart' });
    stop = true;
    await hammer;
    expect(failures).toEqual([]);
  });

  it('a timeout set before the restart fires when it would have', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'timer');
    const job = await s.exec({ command: 'sleep 60', background: true, timeout: 4 });
    pids.add(job.pid);
    await restartAndWait(d);
    const s2 = new Scoped(await d.client(), 'timer');
    const { last } = await s2.pollUntilEnded(job.sessionId, 30_000);
    expect(last.status).toBe('failed');
    expect(last.reason).toBe('timeout');
    const listed = (await s2.list()).find((x: any) => x.sessionId === job.sessionId);
    // Counted from the start, not from the restart: ended after 4 s of running, and not 4 s after the restart.
    expect(listed.runtimeMs).toBeGreaterThanOrEqual(4000);
    expect(alive(job.pid)).toBe(false);
  });

  it('an upgrade: the procctld installed now (another version) takes the sessions, and says the versions in the trail', async () => {
    const pkg = packageCopy('0.1.0-old');
    const d = await startDaemon({ procctld: join(pkg, 'bin', 'procctld') });
    expect((await daemonStatus(d)).version).toBe('0.1.0-old');
    const s = new Scoped(await d.client(), 'upgrade');
    const n = 250;
    const count = await s.exec({ command: heldCounter(n), background: true });
    pids.add(count.pid);
    await s.waitOutput(count.sessionId, '\n10\n');
    setVersion(pkg, '0.1.0-new');
    const answer = await restartAndWait(d);
    expect(answer).toMatchObject({ from: '0.1.0-old', to: '0.1.0-new', sessions: 1 });
    expect((await daemonStatus(d)).version).toBe('0.1.0-new');
    const s2 = new Scoped(await d.client(), 'upgrade');
    await release(s2, count.sessionId);
    await s2.pollUntilEnded(count.sessionId, 30_000);
    expectEveryNumberOnce((await s2.log(count.sessionId, { offset: 0, limit: 1000 })).output, n);
    const history = await (await d.client()).call('audit.verify', operator(d));
    expect(history.ok).toBe(true);
    const trail = readFileSync(join(d.env.PROCCTL_STATE_DIR!, 'audit', 'audit-1.jsonl'), 'utf8');
    expect(trail).toMatch(/"type":"restart".*"from":"0\.1\.0-old".*"to":"0\.1\.0-new"/);
  });
});

describe('refusals are safe (SPEC §19)', () => {
  it('a new image that reads another format: refused before anything changes, the old image serves on', async () => {
    const pkg = packageCopy('0.1.0');
    const d = await startDaemon({ procctld: join(pkg, 'bin', 'procctld') });
    const schema = join(pkg, 'dist', 'src', 'daemon', 'handover', 'format.js');
    const s = new Scoped(await d.client(), 'format');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    writeFileSync(schema, readFileSync(schema, 'utf8').replace('export const HANDOVER_FORMAT = 1;', 'export const HANDOVER_FORMAT = 2;'));
    const c = await d.client();
    const r = await c.request('daemon.restart', operator(d));
    expect(r.error?.data?.kind).toBe('conflict');
    expect(r.error?.message).toMatch(/reads hand-over format 2 and this one writes 1/);
    const st = await daemonStatus(d);
    expect(st.restarts.planned).toBe(0);
    expect((await s.list()).find((x: any) => x.sessionId === job.sessionId).status).toBe('running');
    expect((await s.exec({ command: 'echo still' })).output).toBe('still\n');
  });

  it('a config the new image would refuse (a typo since the start): refused before anything changes, naming the problem', async () => {
    const d = await startDaemon({ config: { tools: { exec: { killGraceMs: 1000 } } } });
    const s = new Scoped(await d.client(), 'config');
    const job = await s.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    writeFileSync(join(d.dir, 'config.json'), '{"tools": {"exec": {"killGraceMs": "soon"}}}');
    const r = await (await d.client()).request('daemon.restart', operator(d));
    expect(r.error?.data?.kind).toBe('unavailable');
    expect(r.error?.message).toMatch(/did not start: .*killGraceMs/);
    expect((await daemonStatus(d)).restarts.planned).toBe(0);
    expect((await s.list()).find((x: any) => x.sessionId === job.sessionId).status).toBe('running');
  });

  it('a new image that cannot read the hand-over stops what it was given as lost, says why, and leaves nothing running', async () => {
    const pkg = packageCopy('0.1.0');
    const d = await startDaemon({ procctld: join(pkg, 'bin', 'procctld'), env: { PROCCTL_ON_CRASH: 'keep' } });
    const s = new Scoped(await d.client(), 'unreadable');
    const job = await s.exec({ command: 'sleep 60', background: true });
    const term = await s.exec({ command: 'sleep 60', background: true, pty: true });
    pids.add(job.pid);
    pids.add(term.pid);
    const oldGuardian = guardianOf(d.proc.pid!)!;
    expect(oldGuardian).toBeDefined();
    const root = (await daemonStatus(d)).cgroups.root as string | undefined;
    const rootIno = root === undefined ? undefined : statSync(root).ino;
    // The next image answers format 1 but wants a field the old one never writes.
    const schema = join(pkg, 'dist', 'src', 'daemon', 'handover', 'schema.js');
    writeFileSync(schema, readFileSync(schema, 'utf8').replace('format: z.literal(HANDOVER_FORMAT),', 'format: z.literal(HANDOVER_FORMAT), extra: z.string(),'));
    await restartAndWait(d);
    const s2 = new Scoped(await d.client(), 'unreadable');
    await waitFor(() => !alive(job.pid) && !alive(term.pid), { what: 'the sessions given over to be stopped' });
    const rec = (await s2.list()).find((x: any) => x.sessionId === job.sessionId);
    expect(rec.status).toBe('failed');
    expect(rec.reason).toBe('lost');
    const poll = await s2.process({ action: 'poll', sessionId: job.sessionId });
    expect(JSON.stringify(poll)).toMatch(/could not take it over in a planned restart: the hand-over is not readable: extra/);
    expect((await daemonStatus(d)).restarts).toMatchObject({ planned: 1, lost: 2 });
    // The last image's guardian saw its pipe close with the daemon's PID running on: it killed its
    // own sessions and went, reaped by the new image, leaving the new image's cgroups alone.
    await waitFor(() => !existsSync(`/proc/${oldGuardian}`), { what: "the last image's guardian to exit and be reaped" });
    // Told so on its pipe by the new image, not left to find the daemon's process running on.
    expect(d.stderr()).toContain('did not take this guardian (it said so)');
    // The same directory, never removed and made again (kernfs gives a new one a new inode).
    if (root !== undefined) expect(statSync(root).ino).toBe(rootIno);
    expect(guardianOf(d.proc.pid!)).not.toBe(oldGuardian);
    // It left the path the new image's guardian listens on for a crash (one per state directory) alone.
    await waitFor(() => guardianOf(d.proc.pid!) !== undefined, { what: "the new image's guardian" });
    expect(existsSync(join(d.env.PROCCTL_STATE_DIR!, 'guardian.sock'))).toBe(true);
    // The lost sessions' leaders, children of this PID, are reaped: no zombie is left.
    await waitFor(() => zombiesOf(d.proc.pid!).length === 0, { what: `no zombie child of the daemon (${zombiesOf(d.proc.pid!).join(', ')})` });
    expect((await s2.exec({ command: 'echo works' })).output).toBe('works\n');
  });

  for (const step of ['check', 'wind', 'hold', 'settle', 'exec']) {
    it(`a failure at step "${step}" leaves the old image serving, every session running on`, async () => {
      const d = await startDaemon({ env: { PROCCTL_FAULT_HANDOVER: step } });
      const s = new Scoped(await d.client(), 'fault');
      const n = 150;
      const count = await s.exec({ command: heldCounter(n), background: true });
      pids.add(count.pid);
      await s.waitOutput(count.sessionId, '\n5\n');
      const c = await d.client();
      const r = await c.request('daemon.restart', operator(d));
      if (step === 'exec') {
        // The answer goes before the last step: the old image says so in its log and goes on.
        expect(r.result?.sessions).toBe(1);
        await waitFor(() => d.stderr().includes('restart failed') || d.stdout().includes('restart failed'), { what: 'the failure to be logged' });
      } else {
        expect(r.error?.message).toMatch(new RegExp(`injected at step "${step}"`));
      }
      expect((await daemonStatus(d)).restarts.planned).toBe(0);
      const s2 = new Scoped(await d.client(), 'fault');
      await release(s2, count.sessionId);
      await s2.pollUntilEnded(count.sessionId, 30_000);
      expectEveryNumberOnce((await s2.log(count.sessionId, { offset: 0, limit: 1000 })).output, n);
      expect((await s2.exec({ command: 'echo after' })).output).toBe('after\n');
    });
  }

  it('a new image that does not carry a kind of session (an older build: no terminals) refuses the restart, naming it', async () => {
    const pkg = packageCopy('0.1.0');
    const d = await startDaemon({ procctld: join(pkg, 'bin', 'procctld') });
    const schema = join(pkg, 'dist', 'src', 'daemon', 'handover', 'format.js');
    writeFileSync(schema, readFileSync(schema, 'utf8').replace(/export const CARRIES = \[[^\]]*\]/, 'export const CARRIES = []'));
    const s = new Scoped(await d.client(), 'pty');
    const job = await s.exec({ command: 'sleep 300', background: true, pty: true });
    pids.add(job.pid);
    const r = await (await d.client()).request('daemon.restart', operator(d));
    expect(r.error?.data?.kind).toBe('conflict');
    expect(r.error?.message).toContain(job.sessionId);
    // A terminal whose output goes through a tap pipe needs an image that reads the pipe first.
    expect(r.error?.message).toMatch(/does not carry a session of this kind \(terminal, terminal-tap\)/);
    expect((await daemonStatus(d)).restarts.planned).toBe(0);
    expect((await s.list()).find((x: any) => x.sessionId === job.sessionId).status).toBe('running');
  });

  it('daemon.restart is the operator\'s: a scope\'s request is refused', async () => {
    const d = await startDaemon();
    const r = await (await d.client()).request('daemon.restart', { scope: 'default' });
    expect(r.error?.data?.kind).toBe('forbidden');
  });
});
