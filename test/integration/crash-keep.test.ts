import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { crashDaemon, keepingState, keptByGuardian } from '../helpers/crash.js';
import { alive, ROOT, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { daemonStatus, restartAndWait } from '../helpers/restart.js';
import { killLeftovers, leftovers } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { Scoped } from '../helpers/session.js';
import { guardianOf, markedProcesses, readRecords, removeStateDirs, sessionsDir } from '../helpers/state.js';
import { hostScratch, killMarked, NO_CURL, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * A crash keeps the sessions (SPEC §19, durability.onCrash "keep"): the daemon is SIGKILLed, its
 * sessions run on with their output kept by the guardian, and a new daemon on the same state
 * directory adopts them; when none comes within crashGraceMs, nothing is left running.
 */

const pids = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

afterAll(() => removeStateDirs());

/**
 * A counter printing every 10 ms, `n` numbers, quiet for 2 s after `quietAfter`: the daemon is
 * killed then, so that what it had read is on disk (a crash while the daemon holds a chunk it
 * read and had not yet written to the spool loses that chunk: docs/durability.md); everything
 * after is printed while no daemon lives, or after the adoption.
 */
const counter = (n: number, quietAfter: number) => `i=0; while [ $i -lt ${n} ]; do echo $i; [ $i = ${quietAfter} ] && sleep 2; i=$((i+1)); sleep 0.01; done`;

function expectEveryNumberOnce(output: string, n: number): void {
  const lines = output.split('\n').filter((l) => l !== '');
  for (let i = 0; i < Math.max(n, lines.length); i++) if (lines[i] !== String(i)) throw new Error(`line ${i} is ${JSON.stringify(lines[i])}: a number was lost or doubled`);
  expect(lines.length).toBe(n);
}

/** A daemon on the env of keepingState() (`config` its config, when given), and a client of it in `scope`. */
async function keeping(env: Record<string, string>, scope: string, config?: unknown): Promise<[TestDaemon, Scoped]> {
  const d = await startDaemon({ env, config });
  return [d, new Scoped(await d.client(), scope)];
}

describe('a crash keeps the sessions (durability.onCrash "keep")', () => {
  it('a crash before the guardian has even loaded: the guardian knows its daemon by what it was told, not by its parent, and keeps the sessions for the next daemon', async () => {
    const { state, env } = keepingState();
    // Every guardian this daemon starts waits 1.5 s before it loads (a slow machine's node start):
    // the daemon is killed meanwhile, and the guardian's parent is another process by its load.
    const slow = join(state, '..', `slow-guardian-${process.pid}.cjs`);
    writeFileSync(slow, "if ((process.argv[1] || '').endsWith('guardian.js')) Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1500);\n");
    const [d1, s1] = await keeping({ ...env, NODE_OPTIONS: `--require ${slow}` }, 'early');
    const job = await s1.exec({ command: 'sleep 300', background: true });
    pids.add(job.pid);
    await keptByGuardian(state, job.sessionId);
    const guardian = guardianOf(d1.proc.pid!);
    expect(guardian, 'the guardian, started and not loaded yet').toBeDefined();
    await crashDaemon(d1.proc.pid!, state);
    expect(alive(job.pid)).toBe(true);
    const [d2, s2] = await keeping(env, 'early');
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: 1, lost: 0 });
    const listed = (await s2.list()).find((x: any) => x.sessionId === job.sessionId);
    expect(listed, JSON.stringify(listed)).toMatchObject({ status: 'running' });
    rmSync(slow, { force: true });
  });

  it('a counter keeps every number exactly once across a SIGKILL of the daemon and a new daemon; a pipe session takes input after it', async () => {
    const { state, env } = keepingState();
    const [d1, s1] = await keeping(env, 'keep');
    const n = 400;
    const count = await s1.exec({ command: counter(n, 49), background: true });
    pids.add(count.pid);
    const cat = await s1.exec({ command: 'cat', background: true });
    pids.add(cat.pid);
    await s1.process({ action: 'write', sessionId: cat.sessionId, data: 'before\n' });
    await s1.waitOutput(cat.sessionId, 'before');
    await keptByGuardian(state, count.sessionId);
    await keptByGuardian(state, cat.sessionId);
    await waitFor(() => readFileSync(join(sessionsDir(state), `${count.sessionId}.log`), 'utf8').endsWith('\n49\n'), { what: 'the counter\'s quiet moment, its output so far in the spool' });
    const guardian = guardianOf(d1.proc.pid!);
    expect(guardian, 'the guardian').toBeDefined();

    await crashDaemon(d1.proc.pid!, state);
    // The daemon is gone; its sessions run on, and the counter prints on into the pipe the guardian holds.
    expect(alive(count.pid)).toBe(true);
    expect(alive(cat.pid)).toBe(true);

    const [d2, s2] = await keeping(env, 'keep');
    const st = await daemonStatus(d2);
    expect(st.restarts).toMatchObject({ crash: 1, adopted: 2, lost: 0 });
    await waitFor(() => !alive(guardian!), { what: 'the old guardian to leave once it handed over' });

    await s2.process({ action: 'write', sessionId: cat.sessionId, data: 'after\n' });
    await s2.waitOutput(cat.sessionId, 'after');
    const { last } = await s2.pollUntilEnded(count.sessionId, 30_000);
    expect(last.status).toBe('completed');
    expectEveryNumberOnce((await s2.log(count.sessionId, { offset: 0, limit: 1000 })).output, n);
    const listed = (await s2.list()).find((x: any) => x.sessionId === cat.sessionId);
    expect(listed.pid).toBe(cat.pid);
    expect(listed.tail).toBe('before\nafter\n');
    expect(readRecords(state).get(count.sessionId)).toMatchObject({ adopted: 'crash' });
    expect((await s2.exec({ command: 'echo fresh' })).output).toBe('fresh\n');
    // Closing its stdin ends the adopted cat, though two guardians have held a copy of that end.
    await s2.process({ action: 'write', sessionId: cat.sessionId, data: 'last\n', eof: true });
    const ended = await s2.pollUntilEnded(cat.sessionId, 20_000);
    expect(ended.last.status).toBe('completed');
    expect(alive(cat.pid)).toBe(false);
  });

  it('a terminal session keeps every number across a SIGKILL of the daemon, and takes input, a resize and its end after it', async () => {
    const { state, env } = keepingState();
    const [d1, s1] = await keeping(env, 'tty');
    const n = 300;
    const count = await s1.exec({ command: counter(n, 49), background: true, pty: true });
    pids.add(count.pid);
    // Reads lines, says each with the terminal's size; ends with 3 at end of input (^D).
    const shell = await s1.exec({ command: 'stty -echo; while read l; do echo "got:$l size:$(stty size)"; done; exit 3', background: true, pty: true });
    pids.add(shell.pid);
    await s1.process({ action: 'write', sessionId: shell.sessionId, data: 'before\n' });
    await s1.waitOutput(shell.sessionId, 'got:before size:30 120');
    await keptByGuardian(state, count.sessionId);
    await keptByGuardian(state, shell.sessionId);
    await waitFor(() => readFileSync(join(sessionsDir(state), `${count.sessionId}.log`), 'utf8').endsWith('\n49\r\n'), { what: 'the counter\'s quiet moment, its output so far in the spool' });
    const guardian = guardianOf(d1.proc.pid!);
    expect(guardian, 'the guardian').toBeDefined();

    await crashDaemon(d1.proc.pid!, state);
    // The terminal's master is held by the guardian alone now: no hang-up, the counter prints on.
    expect(alive(count.pid)).toBe(true);
    expect(alive(shell.pid)).toBe(true);

    const [d2, s2] = await keeping(env, 'tty');
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: 2, lost: 0 });
    await waitFor(() => !alive(guardian!), { what: 'the old guardian to leave once it handed over' });
    const listed = (await s2.list()).find((x: any) => x.sessionId === shell.sessionId);
    expect(listed.pid).toBe(shell.pid);
    expect(['running', 'waiting_input']).toContain(listed.status);
    expect(readRecords(state).get(shell.sessionId)).toMatchObject({ adopted: 'crash', pty: true });

    await s2.process({ action: 'resize', sessionId: shell.sessionId, cols: 100, rows: 40 });
    await s2.process({ action: 'write', sessionId: shell.sessionId, data: 'after\n' });
    await s2.waitOutput(shell.sessionId, 'got:after size:40 100');
    const { last } = await s2.pollUntilEnded(count.sessionId, 30_000);
    expect(last.status).toBe('completed');
    expectEveryNumberOnce((await s2.log(count.sessionId, { offset: 0, limit: 1000 })).output.replaceAll('\r', ''), n);
    // Its end of input ends it, though the guardian held a copy of the terminal's master.
    await s2.process({ action: 'send-keys', sessionId: shell.sessionId, keys: ['C-d'] });
    const ended = await s2.pollUntilEnded(shell.sessionId, 20_000);
    expect(['completed', 'failed']).toContain(ended.last.status);
    expect(alive(shell.pid)).toBe(false);
  });

  it('a planned restart keeps the guardian\'s copies: a crash after it still keeps the sessions', async () => {
    const { state, env } = keepingState();
    const [d1, s1] = await keeping(env, 'both');
    const cat = await s1.exec({ command: 'cat', background: true });
    pids.add(cat.pid);
    await keptByGuardian(state, cat.sessionId);
    const c = await TestClient.connect(d1.socket);
    await c.call('daemon.restart', { scope: '*', approverToken: readFileSync(`${d1.socket}.approver`, 'utf8').trim() });
    c.close();
    await waitFor(async () => (await daemonStatus(d1).catch(() => undefined))?.restarts.planned === 1, { what: 'the new image to serve', timeoutMs: 30_000 });
    const s1b = new Scoped(await d1.client(), 'both');
    await s1b.process({ action: 'write', sessionId: cat.sessionId, data: 'one\n' });
    await s1b.waitOutput(cat.sessionId, 'one');
    await crashDaemon(d1.proc.pid!);
    const d2 = await startDaemon({ env });
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: 1, lost: 0 });
    const s2 = new Scoped(await d2.client(), 'both');
    await s2.process({ action: 'write', sessionId: cat.sessionId, data: 'two\n' });
    await s2.waitOutput(cat.sessionId, 'two');
    expect((await s2.list()).find((x: any) => x.sessionId === cat.sessionId).tail).toBe('one\ntwo\n');
  });

  it('the records a planned restart writes again once the new image serves are right: two restarts, then a SIGKILL at once, and every session is adopted, a terminal among them', async () => {
    const { state, env } = keepingState();
    const [d1, s1] = await keeping(env, 'twice');
    const cat = await s1.exec({ command: 'cat', background: true });
    const tty = await s1.exec({ command: 'cat', background: true, pty: true });
    for (const s of [cat, tty]) {
      pids.add(s.pid);
      await keptByGuardian(state, s.sessionId);
    }
    const before = new Map([cat, tty].map((s) => [s.sessionId, readRecords(state).get(s.sessionId)]));
    const file = (id: string) => join(sessionsDir(state), `${id}.json`);
    for (const round of [0, 1]) {
      const written = new Map([cat, tty].map((s) => [s.sessionId, readFileSync(file(s.sessionId), 'utf8')]));
      // Told apart from the record the old image wrote at the hand-over by a byte that only it has.
      for (const s of [cat, tty]) writeFileSync(file(s.sessionId), written.get(s.sessionId)!.replace(/}\s*$/, ', "x": 1}'));
      await restartAndWait(d1, round);
      // The new image writes each record again once it serves (not before), nothing having changed in the session.
      for (const s of [cat, tty]) await waitFor(() => !readFileSync(file(s.sessionId), 'utf8').includes('"x"'), { what: `the record of ${s.sessionId} written again after restart ${round + 1}` });
    }
    for (const s of [cat, tty]) {
      const rec = readRecords(state).get(s.sessionId);
      // cat waits for input: running, or said waiting for it (SPEC §7) once quiet that long.
      expect(['running', 'waiting_input']).toContain(rec.status);
      expect(rec).toMatchObject({ pid: s.pid, pidStartTime: before.get(s.sessionId).pidStartTime });
    }
    // Nothing written to the sessions since: what keeps them through the crash is what the guardian held all along.
    await crashDaemon(d1.proc.pid!);
    const d2 = await startDaemon({ env });
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: 2, lost: 0 });
    const s2 = new Scoped(await d2.client(), 'twice');
    for (const s of [cat, tty]) {
      await s2.process({ action: 'write', sessionId: s.sessionId, data: 'after\n' });
      await s2.waitOutput(s.sessionId, 'after');
    }
  });

  it('no daemon within crashGraceMs: every process of every session is killed, as a crash with "kill" does', async () => {
    const graceMs = 1500;
    const { state, env } = keepingState(graceMs);
    const [d1, s1] = await keeping(env, 'grace');
    const a = await s1.exec({ command: 'sleep 600', background: true });
    const b = await s1.exec({ command: 'setsid sleep 600 >/dev/null 2>&1 & echo "p=$!"; sleep 600', background: true });
    pids.add(a.pid);
    pids.add(b.pid);
    await s1.waitOutput(b.sessionId, 'p=');
    const escaped = Number(/p=(\d+)/.exec((await s1.log(b.sessionId, { offset: 0 })).output)![1]);
    pids.add(escaped);
    await keptByGuardian(state, a.sessionId);
    await keptByGuardian(state, b.sessionId);
    const guardian = guardianOf(d1.proc.pid!)!;

    const t0 = Date.now();
    await crashDaemon(d1.proc.pid!, state);
    // Within the grace they run on.
    expect(leftovers([a.pid, b.pid, escaped])).toHaveLength(3);
    await waitFor(() => leftovers([a.pid, b.pid, escaped]).length === 0 && markedProcesses([a.sessionId, b.sessionId]).length === 0, {
      timeoutMs: graceMs + 10_000,
      what: 'every session process to be gone once the grace ended',
    });
    const took = Date.now() - t0;
    console.log(`crashGraceMs ${graceMs}: every session process was gone ${took} ms after the crash`);
    expect(took).toBeGreaterThanOrEqual(graceMs - 100);
    await waitFor(() => !alive(guardian), { what: 'the guardian to exit' });
    expect(existsSync(join(state, 'guardian.sock'))).toBe(false);

    // A daemon that comes later finds them lost, as after any crash.
    const [d2, s2] = await keeping(env, 'grace');
    const listed = new Map((await s2.list()).map((x: any) => [x.sessionId, x]));
    expect(listed.get(a.sessionId)).toMatchObject({ status: 'failed', reason: 'lost' });
    expect(readRecords(state).get(a.sessionId).error).toContain('durability.crashGraceMs');
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: 0, lost: 2 });
  });

  it('a session younger than its first record is not kept: the guardian kills it at once, the others run on', async () => {
    const { state, env } = keepingState();
    const [d1, s1] = await keeping(env, 'young');
    const old = await s1.exec({ command: 'sleep 600', background: true });
    pids.add(old.pid);
    await keptByGuardian(state, old.sessionId);
    const young = await s1.exec({ command: 'sleep 600', yieldMs: 0 } as any);
    pids.add(young.pid);
    await crashDaemon(d1.proc.pid!);
    if (readRecords(state).get(young.sessionId)?.pidStartTime !== undefined) return; // the machine was slow: it was kept after all
    await waitFor(() => !alive(young.pid), { timeoutMs: 5000, what: 'the session too young to keep to be killed' });
    expect(alive(old.pid)).toBe(true);
    const [d2, s2] = await keeping(env, 'young');
    const listed = new Map((await s2.list()).map((x: any) => [x.sessionId, x]));
    expect(listed.get(young.sessionId)).toMatchObject({ status: 'failed', reason: 'lost' });
    expect(listed.get(old.sessionId)).toMatchObject({ status: 'running' });
    expect(readFileSync(join(sessionsDir(state), `${old.sessionId}.json`), 'utf8')).toContain('"adopted":"crash"');
  });
});

if (NO_CURL && !SKIP_SANDBOX) console.warn(`skipping the confined crash tests: ${NO_CURL}`);

describe.skipIf(SKIP_SANDBOX || NO_CURL !== undefined)('a crash keeps sandboxed sessions', () => {
  const base = hostScratch('procctl-crash-');
  const workspace = join(base, 'workspace');
  const addonCopy = join(base, 'procctl.node');
  const confined = new Set<string>();
  let server: Server;
  let port = 0;

  beforeAll(async () => {
    mkdirSync(workspace);
    copyFileSync((createRequire(import.meta.url)('node-gyp-build') as { resolve(dir: string): string }).resolve(ROOT), addonCopy);
    server = createServer((q, r) => r.end(`hello ${q.url?.slice(1)}\n`));
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    port = (server.address() as { port: number }).port;
  });
  afterEach(() => killMarked(confined));
  afterAll(() => {
    server?.close();
    rmSync(base, { recursive: true, force: true });
  });

  // curl goes to 127.0.0.1 directly when NO_PROXY names it (the job's own loopback); these ask the proxy.
  const CURL = 'curl -sS -m 20 --noproxy ""';
  /** A node one-liner that asks the session's channel for a connection and sends it one checkpoint. */
  const checkpoint = (name: string) =>
    `${process.execPath} -e 'const fd=Number(process.env.PROCCTL_SOCKET.slice(3));const s=new (require("net").Socket)({fd:require(process.argv[1]).receiveConnection(fd,10000)});s.write(JSON.stringify({jsonrpc:"2.0",id:1,method:"checkpoint",params:{name:process.argv[2]}})+"\\n");s.on("data",b=>{console.log(String(b).includes("\\"result\\"")?"checkpoint="+process.argv[2]:String(b));s.end();})' ${addonCopy} ${name}`;

  it('a review session runs on across a SIGKILL of the daemon: what it wrote before and after is held, listed and applied once it ends', async () => {
    const { state, env } = keepingState();
    const ws = join(base, 'review-ws');
    mkdirSync(ws);
    const config = { sandbox: { mode: 'workspace-write', workspaces: [ws] } };
    const [d1, s1] = await keeping(env, 'review', config);
    const job = await s1.exec({ command: 'echo one > before.txt && echo wrote; read -r x; echo two > after.txt; echo "$x" >> before.txt', background: true, workdir: ws, changes: 'review' });
    confined.add(job.sessionId);
    pids.add(job.pid);
    await s1.waitOutput(job.sessionId, 'wrote');
    await keptByGuardian(state, job.sessionId);
    expect((await s1.list()).find((x: any) => x.sessionId === job.sessionId).changes).toMatchObject({ state: 'running' });

    await crashDaemon(d1.proc.pid!, state);
    expect(alive(job.pid)).toBe(true);

    const [d2, s2] = await keeping(env, 'review', config);
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: 1, lost: 0 });
    expect((await s2.list()).find((x: any) => x.sessionId === job.sessionId).changes).toMatchObject({ state: 'running' });
    await s2.process({ action: 'write', sessionId: job.sessionId, data: 'three\n' });
    const { last } = await s2.pollUntilEnded(job.sessionId, 30_000);
    expect(last.status).not.toBe('running');
    // The workspace is untouched until the changes are applied.
    expect(existsSync(join(ws, 'before.txt'))).toBe(false);
    await waitFor(async () => (await s2.list()).find((x: any) => x.sessionId === job.sessionId).changes?.state === 'pending', { what: 'the changes to be pending' });
    const listed = await s2.process({ action: 'changes', sessionId: job.sessionId, stat: true });
    expect(listed.files.map((f: any) => f.path).sort()).toEqual(['after.txt', 'before.txt']);
    await s2.process({ action: 'apply', sessionId: job.sessionId });
    expect(readFileSync(join(ws, 'before.txt'), 'utf8')).toBe('one\nthree\n');
    expect(readFileSync(join(ws, 'after.txt'), 'utf8')).toBe('two\n');
  }, 120_000);

  it('network by name and the job\'s own channel keep working after a SIGKILL of the daemon, with the policy the session started with', async () => {
    const { state, env } = keepingState();
    const config = { sandbox: { mode: 'workspace-write', workspaces: [base], network: { allow: ['127.0.0.1'], deny: [] } } };
    const [d1, s1] = await keeping(env, 'confined', config);
    // Runs each line it is sent: the same job, before and after the crash.
    const job = await s1.exec({ command: 'while read -r l; do eval "$l"; done', background: true, workdir: workspace });
    confined.add(job.sessionId);
    pids.add(job.pid);
    await s1.process({ action: 'write', sessionId: job.sessionId, data: `${CURL} http://127.0.0.1:${port}/before\n` });
    await s1.waitOutput(job.sessionId, 'hello before');
    await s1.process({ action: 'write', sessionId: job.sessionId, data: `${checkpoint('one')}\n` });
    await s1.waitOutput(job.sessionId, 'checkpoint=one');
    await keptByGuardian(state, job.sessionId);
    const guardian = guardianOf(d1.proc.pid!);

    await crashDaemon(d1.proc.pid!, state);
    expect(alive(job.pid)).toBe(true);

    const [d2, s2] = await keeping(env, 'confined', config);
    expect((await daemonStatus(d2)).restarts).toMatchObject({ crash: 1, adopted: 1, lost: 0 });
    await waitFor(() => !alive(guardian!), { what: 'the old guardian to leave once it handed over' });
    const listed = (await s2.list()).find((x: any) => x.sessionId === job.sessionId);
    expect(listed.pid).toBe(job.pid);
    expect(['running', 'waiting_input']).toContain(listed.status);
    await s2.process({ action: 'write', sessionId: job.sessionId, data: `${CURL} http://127.0.0.1:${port}/after\n` });
    await s2.waitOutput(job.sessionId, 'hello after');
    // The policy goes on: a host it does not allow is refused and counted on the session.
    await s2.process({ action: 'write', sessionId: job.sessionId, data: `${CURL} http://127.0.0.2:${port}/no; echo\n` });
    await s2.waitOutput(job.sessionId, 'blocked 127.0.0.2: not in sandbox.network.allow');
    await s2.process({ action: 'write', sessionId: job.sessionId, data: `${checkpoint('two')}\n` });
    await s2.waitOutput(job.sessionId, 'checkpoint=two');
    expect((await s2.list()).find((x: any) => x.sessionId === job.sessionId).checkpoint).toMatchObject({ name: 'two' });
    await s2.process({ action: 'write', sessionId: job.sessionId, data: 'exit 4\n' });
    const { last } = await s2.pollUntilEnded(job.sessionId, 30_000);
    expect(last.status).not.toBe('running');
    expect(alive(job.pid)).toBe(false);
  }, 120_000);
});
