import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { restartAndWait } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-sampler-'));
const pids = new Set<number>();

afterAll(async () => {
  await stopAllDaemons();
  for (const pid of pids) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

/** The samplers' threads of `pid` (named `procctl-sampler` by runner/sample-worker.ts). */
const samplerThreads = (pid: number) => allThreadsOf(pid).filter((t) => t.comm === 'procctl-sampler');

/** Every thread of `pid`, its name (comm), scheduling policy (stat field 41; 5 is SCHED_IDLE) and nice value (field 19). */
function allThreadsOf(pid: number): { tid: number; comm: string; policy: number; nice: number }[] {
  const out = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'latin1');
      // Fields from the third on, after the command's closing parenthesis.
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.push({ tid: Number(tid), comm: stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')')), nice: Number(f[19 - 3]), policy: Number(f[41 - 3]) });
    } catch {
      // ended meanwhile
    }
  }
  return out;
}

/** Listens on a port the kernel picks once the daemon has had its first look, then burns CPU in 50 ms spells, 50 ms apart (a core's half: the idle samplers' thread is not kept off the machine for long). */
const LATE_SERVER =
  `exec node -e "setTimeout(() => { const s = require('net').createServer().listen(0, '127.0.0.1', () => console.log('port', s.address().port)); ` +
  `const burn = () => { const t = Date.now(); while (Date.now() - t < 50); setTimeout(burn, 50); }; burn(); }, 500)"`;

describe("the samplers' reads run on a thread of their own, at idle priority", () => {
  it('where sessions have no CPU group of their own (cgroups off), the helper threads run at normal priority: a busy job in the daemon\'s group would keep an idle one, and the main thread waiting for its lock, off the core', async () => {
    const d = await startDaemon({ config: { cgroups: { mode: 'off' } } });
    const s = new Scoped(await d.client(), 'sampler');
    const r = await s.exec({ command: LATE_SERVER, background: true });
    pids.add(r.pid);
    const reader = await s.exec({ command: 'cat', background: true });
    pids.add(reader.pid);
    const listed = async () => (await s.list()).find((x) => x.sessionId === r.sessionId);
    const port = Number((await waitFor(async () => /port (\d+)/.exec((await s.log(r.sessionId, { offset: 0 })).output), { what: 'the server to print its port' }))[1]);
    // Found by a refresh (the samplers' thread runs), while the watcher looks at the reader (its thread runs).
    await waitFor(async () => (await listed())?.ports?.some((p: { port: number }) => p.port === port), { what: 'list to show the port' });
    const looks = await waitFor(() => allThreadsOf(d.proc.pid!).find((t) => t.comm === 'procctl-looks'), { what: 'the looks thread' });
    expect(looks!.policy).toBe(0);
    // The samplers' thread starts at the first refresh of a sample asked for (list asks): at normal priority too.
    await waitFor(async () => (await s.list()) && samplerThreads(d.proc.pid!).length === 1, { what: "the samplers' thread" });
    expect(samplerThreads(d.proc.pid!).map((t) => t.policy)).toEqual([0]);
    expect(allThreadsOf(d.proc.pid!).filter((t) => t.policy === 5 || t.nice === 19)).toEqual([]);
  });

  it("refreshes a running session's usage and ports on the samplers' thread: none read on the daemon's thread but after a batch came back late", async () => {
    const file = join(dir, 'trace.json');
    const d = await startDaemon({ env: { PROCCTL_TRACE_FILE: file } });
    const s = new Scoped(await d.client(), 'sampler');
    const r = await s.exec({ command: LATE_SERVER, background: true });
    pids.add(r.pid);
    const listed = async () => (await s.list()).find((x) => x.sessionId === r.sessionId);
    // The first look, before it listens: the port can only be found by a refresh.
    const first = await listed();
    expect(first.ports).toBeUndefined();
    expect(first.resources).toBeDefined();
    const port = Number((await waitFor(async () => /port (\d+)/.exec((await s.log(r.sessionId, { offset: 0 })).output), { what: 'the server to print its port' }))[1]);
    await waitFor(async () => (await listed())?.ports?.some((p: { port: number }) => p.port === port), { what: "list to show the port the session listened on after the daemon's first look" });
    // Its CPU time grows from refresh to refresh while it burns.
    const seen = new Set<number>();
    await waitFor(
      async () => {
        seen.add((await listed()).resources.cpuMs);
        return [...seen].filter((ms) => ms > 0).length >= 3;
      },
      { timeoutMs: 30_000, everyMs: 100, what: 'three different CPU times of the burning session in list' },
    );
    // The samplers' thread runs under SCHED_IDLE, one of it; no thread it does not name does
    // (Node's and V8's own: the main thread waits on V8's workers, runner/helper-priority.ts).
    const threads = allThreadsOf(d.proc.pid!);
    expect(samplerThreads(d.proc.pid!).map((t) => t.policy)).toEqual([5]);
    expect(threads.filter((t) => !t.comm.startsWith('procctl-') && t.policy !== 0)).toEqual([]);
    await s.process({ action: 'kill', sessionId: r.sessionId });
    s.c.close();
    await d.stop();
    expect(existsSync(file)).toBe(true);
    const t = JSON.parse(readFileSync(file, 'utf8')) as { kinds: string[]; spans: number[][] };
    const count = (kind: string) => t.spans.filter((sp) => t.kinds[sp[0]] === kind).length;
    // Refreshes were sent to the thread. Each batch is taken back on the daemon's thread in one turn,
    // or is past its deadline: the idle thread kept off both cores by the burning job and whatever
    // else the machine runs (a loaded CI can starve it of every batch), and the refreshes are read on
    // the daemon's thread until it is back (runner/usage.ts). None is read there but after a late one.
    for (const name of ['usage', 'ports']) {
      expect(count(`${name} send`), `${name}: batches sent to the samplers' thread`).toBeGreaterThanOrEqual(1);
      if (count(`${name} late`) === 0) expect(count(`${name} take`), `${name}: batches taken back, none late`).toBeGreaterThanOrEqual(name === 'usage' ? 2 : 1);
      expect(count(`${name} refresh`) > 0, `${name}: read on the daemon's thread, and only after a late batch`).toBe(count(`${name} late`) > 0);
    }
  });

  it('leaves no samplers\' thread of the last image behind a planned restart: the new image has its own, one', async () => {
    const d = await startDaemon();
    const s = new Scoped(await d.client(), 'sampler-restart');
    const r = await s.exec({ command: 'sleep 120', background: true });
    pids.add(r.pid);
    const idleThreads = () => samplerThreads(d.proc.pid!).filter((t) => t.policy === 5);
    // Asked for, its samples are refreshed on the thread, which starts at the first refresh.
    await waitFor(async () => (await s.list()) && idleThreads().length === 1, { what: "the samplers' thread" });
    const before = idleThreads()[0].tid;
    s.c.close();
    await restartAndWait(d);
    const t = new Scoped(await d.client(), 'sampler-restart');
    expect((await t.list()).find((x) => x.sessionId === r.sessionId)?.status).toBe('running');
    await waitFor(async () => (await t.list()) && idleThreads().length === 1 && idleThreads()[0].tid !== before, { what: "the new image's samplers' thread" });
    // A few refreshes on: still the one.
    const after = idleThreads()[0].tid;
    for (let i = 0; i < 3; i++) {
      await t.list();
      await new Promise((res) => setTimeout(res, 700));
    }
    expect(idleThreads().map((x) => x.tid)).toEqual([after]);
    await t.process({ action: 'kill', sessionId: r.sessionId });
    t.c.close();
    expect(await d.stop()).toBe(0);
  });

  // Its descriptors are the daemon's process's, and a dead thread's would stay open for the daemon's
  // life while the samplers read on its thread: Node closes what a worker opened when it ends.
  it('a thread that ends on an error leaves none of the files it kept open behind', async () => {
    const worker = fileURLToPath(new URL('../../dist/src/runner/sample-worker.js', import.meta.url));
    const files = mkdtempSync(join(dir, 'kept-'));
    writeFileSync(join(files, 'cgroup.procs'), `${process.pid}\n`);
    writeFileSync(join(files, 'memory.current'), '4096\n');
    writeFileSync(join(files, 'memory.peak'), '8192\n');
    writeFileSync(join(files, 'pids.current'), '1\n');
    const plan = { members: files, memory: { current: join(files, 'memory.current'), peak: join(files, 'memory.peak') }, pids: { current: join(files, 'pids.current'), peak: join(files, 'pids.current') } };
    const heldOpen = () => readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`).startsWith(files);
      } catch {
        return false;
      }
    }).length;
    const w = new Worker(worker, { workerData: { lowPriority: false } });
    const ended = new Promise<number>((resolve) => w.on('exit', resolve));
    w.on('error', () => undefined);
    try {
      const answered = new Promise<any>((resolve) => w.on('message', (m) => m.kind === 'usage' && resolve(m)));
      w.postMessage({ id: 1, kind: 'usage', ids: Int32Array.of(7), plans: [[7, plan]] });
      const a = await answered;
      expect(Array.from(a.figures.subarray(0, 4))).toEqual([0, 4096, 8192, 1]);
      // Kept open between batches: the read that this test is about.
      expect(heldOpen()).toBeGreaterThan(0);
      // A batch it cannot read (no ids) throws on the thread, which ends.
      w.postMessage({ id: 2, kind: 'usage', ids: null, plans: [] });
      expect(await ended).not.toBe(0);
      expect(heldOpen()).toBe(0);
    } finally {
      await w.terminate();
    }
  });
});
