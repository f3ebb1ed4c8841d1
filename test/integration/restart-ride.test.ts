import { spawn } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { alive, PROCCTL, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';
import { Scoped } from '../helpers/session.js';
import { cliOn, killChildren, spawnCli, waitForOutput } from '../cli/run.js';

/**
 * Clients ride through a planned restart (SPEC §19): the CLI's streams reconnect and go on from
 * the last character they printed, a person sees a pause and not an error. Real daemon, real
 * restarts (`procctl daemon restart`), a counter whose every number must show exactly once.
 */

const pids = new Set<number>();

afterEach(async () => {
  killChildren();
  await stopAllDaemons();
  killLeftovers(pids);
});

/** A counter printing every 10 ms, `n` numbers. */
const counter = (n: number) => `i=0; while [ $i -lt ${n} ]; do echo $i; i=$((i+1)); sleep 0.01; done`;

function expectEveryNumberOnce(output: string, n: number): void {
  const lines = output.split('\n').filter((l) => l !== '');
  for (let i = 0; i < Math.min(n, lines.length); i++) if (lines[i] !== String(i)) throw new Error(`line ${i} is ${JSON.stringify(lines[i])}: a number was lost or doubled`);
  expect(lines.length).toBe(n);
}

function readlinkOr(path: string): string {
  try {
    return readlinkSync(path);
  } catch {
    return '';
  }
}

async function planned(d: TestDaemon): Promise<number> {
  const c = await TestClient.connect(d.socket);
  try {
    return (await c.call('daemon.status')).restarts.planned;
  } finally {
    c.close();
  }
}

/** `procctl daemon restart`, and the new image serving. */
async function restart(d: TestDaemon): Promise<void> {
  const before = await planned(d);
  const r = await cliOn(d.socket)(['daemon', 'restart']);
  expect(r.code, r.stderr).toBe(0);
  await waitFor(async () => (await planned(d).catch(() => before)) > before, { what: 'the new image to serve', timeoutMs: 30_000 });
}

describe('the CLI rides through a planned restart', () => {
  it('log -f goes on from the last character it printed: every number once, and the end', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'default');
    const n = 400;
    const job = await s.exec({ command: counter(n), background: true });
    pids.add(job.pid);
    await s.waitOutput(job.sessionId, '\n5\n');
    const follow = spawnCli(['log', job.sessionId, '-f'], { env: { PROCCTL_SOCKET: d.socket } });
    await waitForOutput(follow, '\n30\n');
    await restart(d);
    const r = await follow.exited;
    expect(r.code, r.stderr).toBe(0);
    expectEveryNumberOnce(r.stdout, n);
    expect(r.stderr).not.toMatch(/lost the connection|error/i);
    // procctl status says it.
    const st = await cliOn(d.socket)(['status']);
    expect(st.stdout).toMatch(/^restarts: 1 planned, 0 after a crash; last \S+, serving again after \d+ ms; 1 session\(s\) kept, 0 lost$/m);
  }, 120_000);

  it('exec in the foreground streams on through two restarts and exits with the command', async () => {
    const d = await startDaemon();
    const n = 500;
    const run = spawnCli(['exec', '--', 'sh', '-c', `${counter(n)}; exit 3`], { env: { PROCCTL_SOCKET: d.socket } });
    await waitForOutput(run, '\n20\n');
    await restart(d);
    await waitForOutput(run, `\n${Math.floor(n / 2)}\n`);
    await restart(d);
    const r = await run.exited;
    expect(r.code, r.stderr).toBe(3);
    expectEveryNumberOnce(r.stdout, n);
  }, 120_000);

  it('events (until none runs) hands over what it missed, and ends when the session ends', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'default');
    // It prints and ends when told, after the restart: however long the CLI takes to start, it finds it running.
    const job = await s.exec({ command: 'cat', background: true });
    pids.add(job.pid);
    const events = spawnCli(['events', '--json'], { env: { PROCCTL_SOCKET: d.socket } });
    await waitFor(() => events.stderr().includes('watching events'), { what: 'events to watch', timeoutMs: 60_000 });
    await restart(d);
    const s2 = new Scoped(await d.client(), 'default');
    await s2.process({ action: 'write', sessionId: job.sessionId, data: 'done-after-restart\n', eof: true });
    const r = await events.exited;
    expect(r.code, r.stderr).toBe(0);
    const lines = r.stdout.trim().split('\n').map((l) => JSON.parse(l));
    expect(lines.filter((e) => e.type === 'output').map((e) => e.data).join('')).toBe('done-after-restart\n');
    expect(lines.filter((e) => e.type === 'exited')).toHaveLength(1);
  }, 120_000);

  it('wait is sent again to the new image with the time it has left', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'default');
    const job = await s.exec({ command: 'sleep 4', background: true });
    pids.add(job.pid);
    const wait = spawnCli(['wait', job.sessionId, '--timeout', '60000'], { env: { PROCCTL_SOCKET: d.socket } });
    // Its request is in flight once it holds a socket (its stdio are pipes).
    await waitFor(() => readdirSync(`/proc/${wait.proc.pid}/fd`).some((fd) => readlinkOr(`/proc/${wait.proc.pid}/fd/${fd}`).startsWith('socket:')), { what: 'wait to connect' });
    await restart(d);
    const r = await wait.exited;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/done/);
  });
});

describe('a restart is a person\'s, and changes wait it out', () => {
  it('daemon.restart sent from inside a session is refused though the job can read the credential; the same by the person works', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'inside');
    const procctl = `${process.execPath} ${PROCCTL}`;
    const plain = await s.exec({ command: `${procctl} daemon restart; echo "exit=$?"`, timeout: 60 });
    expect(plain.output).toContain('cannot be sent from inside a session');
    // Without the marker in its environment, a raw request with the credential read from the file.
    const raw = `{"jsonrpc":"2.0","id":1,"method":"daemon.restart","params":{"scope":"*","approverToken":"'"$(cat "$PROCCTL_SOCKET.approver")"'"}}`;
    const wiped = await s.exec({
      command: `env -i PATH="$PATH" ${process.execPath} -e 'const c=require("net").connect(process.argv[1]);c.end(process.argv[2]+"\\n");c.pipe(process.stdout)' "$PROCCTL_SOCKET" '${raw}'`,
      timeout: 60,
    });
    expect(wiped.output).toContain('cannot be sent from inside a session');
    expect(await planned(d)).toBe(0);
    await restart(d);
    expect(await planned(d)).toBe(1);
  });

  it('write and kill sent while the hand-over is held are refused as restarting, and the CLI sends them again to the new image', async () => {
    // The hand-over is held at its settle step (new work refused) for 3 s, then goes on.
    const d = await startDaemon({ env: { PROCCTL_FAULT_HANDOVER: 'hold-settle', PROCCTL_FAULT_HANDOVER_HOLD_MS: '3000' } });
    const s = new Scoped(await d.client(), 'default');
    const cat = await s.exec({ command: 'cat', background: true });
    pids.add(cat.pid);
    // A client connected before the restart (one that connects during it is held for the next image).
    const other = await TestClient.connect(d.socket);
    const c = await TestClient.connect(d.socket);
    const asked = c.request('daemon.restart', { scope: '*', approverToken: readFileSync(`${d.socket}.approver`, 'utf8').trim() });
    // While it is held: a write and a kill are refused as restarting, and nothing is done.
    // (Probed with a session that does not exist: refused as not_found until the hand-over begins.)
    await waitFor(async () => (await other.request('process', { action: 'write', sessionId: 'nosuch', data: 'x' })).error?.data?.kind === 'restarting', {
      what: 'the hand-over to refuse changes',
      timeoutMs: 30_000,
    });
    const refused = await other.request('process', { action: 'write', sessionId: cat.sessionId, data: 'early\n' });
    expect(refused.error?.code).toBe(-32007);
    const killed = await other.request('process', { action: 'kill', sessionId: cat.sessionId });
    expect(killed.error?.data?.kind).toBe('restarting');
    expect(alive(cat.pid)).toBe(true);
    // The CLI's write, sent meanwhile, is answered by the new image.
    const r = await cliOn(d.socket)(['write', cat.sessionId, 'late']);
    expect(r.code, r.stderr).toBe(0);
    expect((await asked).result?.sessions).toBe(1);
    other.close();
    c.close();
    // Connections are not carried: a new one to the new image.
    const s2 = new Scoped(await d.client(), 'default');
    await s2.waitOutput(cat.sessionId, 'late');
    expect((await s2.log(cat.sessionId, { offset: 0 })).output).not.toContain('early');
    const kill = await cliOn(d.socket)(['kill', cat.sessionId]);
    expect(kill.code, kill.stderr).toBe(0);
    await waitFor(() => !alive(cat.pid), { what: 'cat to be stopped' });
  }, 120_000);
});

describe('a request in the last moment is answered', () => {
  it('clients pipelining requests on open connections through restarts get an answer to every request the kernel took from them', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'default');
    const job = await s.exec({ command: 'sleep 120', background: true });
    pids.add(job.pid);
    s.c.close();
    // A client in Python: its socket reads on after a send fails, as Node's does not (it closes at once).
    const stop = join(d.dir, 'stop-hammer');
    const hammer = spawn('python3', [join(import.meta.dirname, 'hammer.py'), d.socket, stop], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    hammer.stdout.on('data', (b) => (out += b));
    hammer.stderr.on('data', (b) => (err += b));
    const ended = new Promise((r) => hammer.on('close', r));
    try {
      await restart(d);
      await restart(d);
    } finally {
      writeFileSync(stop, '');
    }
    await ended;
    expect(err).toBe('');
    const totals = JSON.parse(out);
    expect(totals.taken).toBeGreaterThan(100);
    expect(totals.unanswered, JSON.stringify(totals)).toBe(0);
    expect(totals.restarting).toBeGreaterThan(0);
  }, 120_000);
});
