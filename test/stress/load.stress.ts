import fc from 'fast-check';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { sharedDaemon, type Scopes } from '../helpers/session.js';
import { sayIfDaemonDies } from './bystander.js';
import { percentile, rng, runSeed, sha256 } from './random.js';

/**
 * 50 clients, each on its own connection and scope, send 1,000 mixed requests at once: short
 * execs with known output (checked by sha256), poll, log, list, status, writes to a `cat`
 * session, kill, clear. Every answer is checked; latency is recorded and printed, not asserted.
 */

const CLIENTS = 50;
const REQUESTS = Number(process.env.STRESS_LOAD_REQUESTS ?? 1_000);
const MAX_OUTPUT = 200_000;
const PENDING = 30_000;

const seed = runSeed(fc.readConfigureGlobal().seed);
console.log(`load seed ${seed}`);

let d: TestDaemon;
let c: TestClient;
let scopes: Scopes;

sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' } }, (x) => {
  ({ d, c, scopes } = x);
  sayIfDaemonDies(d);
});

interface Payload {
  file: string;
  text: string;
  lines: string[];
}

let dir: string;
const payloads: Payload[] = [];

/** Files of base64 text in 76-column lines (what `base64` prints), from the seed; one is over maxOutputChars. */
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'procctl-load-'));
  const r = rng(seed);
  const sizes = [0, 1, 75, 76, 77, 1_000, 5_000, 29_999, 30_001, 45_000, 90_000, 150_000, 199_999, 260_000];
  sizes.forEach((size, i) => {
    const raw = Buffer.alloc(Math.ceil((size * 3) / 4) + 3);
    for (let k = 0; k < raw.length; k++) raw[k] = r.int(0, 255);
    const b64 = raw.toString('base64').slice(0, size);
    const text = (b64.match(/.{1,76}/g) ?? []).join('\n') + (size ? '\n' : '');
    const file = join(dir, `p${i}.txt`);
    writeFileSync(file, text);
    payloads.push({ file, text, lines: splitLines(text) });
  });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function splitLines(text: string): string[] {
  if (text === '') return [];
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return lines;
}

/** SPEC §6 log paging: neither → last 200; limit only → last L; offset only → O to the end; both → [O, O+L). */
function page(lines: string[], offset?: number, limit?: number): string[] {
  if (offset === undefined) return lines.slice(Math.max(0, lines.length - (limit ?? 200)));
  return lines.slice(offset, limit === undefined ? undefined : offset + limit);
}

interface Finished {
  id: string;
  /** The session's whole output. */
  text: string;
  stream: 'stdout' | 'stderr';
  polled: boolean;
}

type Op = 'exec' | 'exec-bg' | 'kill' | 'poll' | 'log' | 'list' | 'status' | 'write' | 'cat-poll' | 'clear' | 'tools';

/** Mostly cheap requests; execs are short and few, so two cores are not swamped by processes. */
const WEIGHTS: [Op, number][] = [
  ['exec', 3],
  ['kill', 1],
  ['poll', 16],
  ['log', 16],
  ['list', 12],
  ['status', 10],
  ['write', 10],
  ['cat-poll', 10],
  ['clear', 4],
  ['tools', 1],
];

const latencies = new Map<Op, number[]>();
/** The slowest requests, with when they were sent (ms into the run) and what they asked: tails to look into. */
const slowest: { op: Op; ms: number; at: number; client: number; what: string }[] = [];
let runStart = 0;
/**
 * Connect to first answer, per client. The daemon takes one new connection per turn of its event
 * loop (libuv since 1.45), so the last of 50 that connect at once waits in the listen backlog
 * behind the traffic of those already in: kept apart, or it lands on the first request sent.
 */
const connectMs: number[] = [];
function record(op: Op, ms: number, sentAt: number, client: number, what: string): void {
  (latencies.get(op) ?? latencies.set(op, []).get(op)!).push(ms);
  if (slowest.length < 8 || ms > slowest[slowest.length - 1].ms) {
    slowest.push({ op, ms: Math.round(ms), at: Math.round(sentAt - runStart), client, what });
    slowest.sort((a, b) => b.ms - a.ms);
    slowest.length = Math.min(slowest.length, 8);
  }
}

/** One client's 1,000 requests, every answer checked; the session registry of its scope ends empty. */
async function runClient(i: number): Promise<void> {
  const connecting = performance.now();
  const client = await d.client();
  expect((await client.call('daemon.status')).pid).toBe(d.proc.pid);
  connectMs.push(performance.now() - connecting);
  const s = scopes.next(`load${i}`, client);
  const r = rng(seed + 17 * (i + 1));
  const total = WEIGHTS.reduce((n, [, w]) => n + w, 0);
  let sent = 0;
  const timed = async <T>(op: Op, fn: () => Promise<T>, what = ''): Promise<T> => {
    const t = performance.now();
    const out = await fn();
    record(op, performance.now() - t, t, i, what);
    sent++;
    return out;
  };
  const created: string[] = [];
  const finished: Finished[] = [];

  const cat = await timed('exec-bg', () => s.exec({ command: 'cat', background: true, name: 'cat' }), 'cat');
  scopes.track(cat.pid);
  created.push(cat.sessionId);
  let written = '';
  let drained = '';

  const exec = async () => {
    // Small payloads mostly; the large ones (past the pending and retained caps) now and then.
    const p = payloads[Math.floor(r.next() ** 2 * payloads.length)];
    const kind = r.int(0, 5);
    const n = r.int(0, p.text.length);
    const word = Buffer.from(Array.from({ length: r.int(1, 3000) }, () => r.int(0, 255))).toString('base64');
    const [command, text, stream, code] = [
      [`cat ${p.file}`, p.text, 'stdout', 0],
      [`head -c ${n} ${p.file}`, p.text.slice(0, n), 'stdout', 0],
      [`printf '%s\\n' '${word}'`, `${word}\n`, 'stdout', 0],
      [`cat ${p.file} >&2`, p.text, 'stderr', 0],
      [`cat ${p.file}; exit 3`, p.text, 'stdout', 3],
      [`tail -n ${n % 50} ${p.file}`, p.lines.slice(Math.max(0, p.lines.length - (n % 50))).map((l) => `${l}\n`).join(''), 'stdout', 0],
    ][kind] as [string, string, 'stdout' | 'stderr', number];
    const res = await timed('exec', () => s.exec({ command, yieldMs: 120_000 }), command.replace(dir, '…').slice(0, 40));
    expect(res.status, command).toBe('completed');
    expect(res.exitCode, command).toBe(code);
    const kept = text.slice(-MAX_OUTPUT);
    expect(sha256(res.output), `output of ${command}`).toBe(sha256(kept));
    expect(res.droppedChars).toBe(text.length - kept.length);
    created.push(res.sessionId);
    finished.push({ id: res.sessionId, text, stream, polled: false });
  };

  const kill = async () => {
    const bg = await timed('exec-bg', () => s.exec({ command: 'sleep 30', background: true }), 'sleep 30');
    scopes.track(bg.pid);
    created.push(bg.sessionId);
    const k = await timed('kill', () => s.process({ action: 'kill', sessionId: bg.sessionId }));
    expect(k.status).toBe('failed');
    expect(k.signal).toBe('SIGTERM');
    expect(k.reason).toBe('user');
    finished.push({ id: bg.sessionId, text: '', stream: 'stdout', polled: false });
  };

  const poll = async () => {
    const f = r.pick(finished);
    const res = await timed('poll', () => s.process({ action: 'poll', sessionId: f.id }));
    const want = f.polled ? '' : f.text.slice(-PENDING);
    expect(sha256(res.output), `poll of ${f.id}`).toBe(sha256(want));
    const dropped = f.polled ? 0 : f.text.length - want.length;
    expect(res.droppedChars?.[f.stream] ?? 0).toBe(dropped);
    f.polled = true;
  };

  const log = async () => {
    const f = r.pick(finished);
    const lines = splitLines(f.text);
    const how = r.int(0, 2);
    const limit = r.int(0, 300);
    const offset = r.int(0, lines.length + 5);
    const params = how === 0 ? {} : how === 1 ? { limit } : { offset, limit };
    const res = await timed('log', () => s.log(f.id, params));
    const want = page(lines, how === 2 ? offset : undefined, how === 0 ? undefined : limit).join('\n');
    expect(sha256(res.output), `log ${JSON.stringify(params)} of ${f.id}`).toBe(sha256(want));
    expect(res.totalLines).toBe(lines.length);
    expect(res.totalChars).toBe(f.text.length);
  };

  const list = async () => {
    const offset = r.next() < 0.7 ? 0 : r.int(0, created.length + 2);
    const res = await timed('list', () => s.process({ action: 'list', limit: 5, ...(offset ? { offset } : {}) }));
    expect(res.total).toBe(created.length);
    expect(res.sessions.map((x: any) => x.sessionId)).toEqual([...created].reverse().slice(offset, offset + 5));
  };

  const write = async () => {
    const data = Buffer.from(Array.from({ length: r.int(1, 600) }, () => r.int(0, 255))).toString('base64') + (r.next() < 0.7 ? '\n' : '');
    const res = await timed('write', () => s.process({ action: 'write', sessionId: cat.sessionId, data }));
    expect(res.bytes).toBe(data.length);
    written += data;
  };

  const catPoll = async (timeout = 0) => {
    const res = await timed('cat-poll', () => s.process({ action: 'poll', sessionId: cat.sessionId, ...(timeout ? { timeout } : {}) }));
    expect(res.droppedChars).toBeUndefined();
    drained += res.output;
    expect(written.startsWith(drained)).toBe(true);
    return res;
  };

  const clear = async () => {
    const f = finished.shift()!;
    const res = await timed('clear', () => s.process({ action: 'clear', sessionId: f.id }));
    expect(res.sessionId).toBe(f.id);
    created.splice(created.indexOf(f.id), 1);
  };

  while (sent < REQUESTS) {
    let x = r.next() * total;
    let op = WEIGHTS.find(([, w]) => (x -= w) < 0)![0];
    if ((op === 'poll' || op === 'log' || op === 'clear') && finished.length === 0) op = 'exec';
    if (finished.length > 20) op = 'clear';
    // The pending cap (30,000 per stream) must never drop what the cat echoes: drain before it could.
    if (op === 'write' && written.length - drained.length > 20_000) op = 'cat-poll';
    if (op === 'exec') await exec();
    else if (op === 'kill') await kill();
    else if (op === 'poll') await poll();
    else if (op === 'log') await log();
    else if (op === 'list') await list();
    else if (op === 'status') expect((await timed('status', () => client.call('daemon.status'))).pid).toBe(d.proc.pid);
    else if (op === 'write') await write();
    else if (op === 'cat-poll') await catPoll();
    else if (op === 'clear') await clear();
    else expect(await timed('tools', () => client.call('tools.list'))).toHaveLength(2);
  }

  // Wind down: the cat echoes everything it was given, exactly once across the polls.
  await s.process({ action: 'write', sessionId: cat.sessionId, eof: true });
  for (let end = Date.now() + 60_000; ; ) {
    const res = await catPoll(2_000);
    if (res.status === 'completed') break;
    if (Date.now() > end) throw new Error(`cat session of client ${i} did not end`);
  }
  expect(sha256(drained)).toBe(sha256(written));
  const catLog = await s.log(cat.sessionId, { offset: 0 });
  expect(sha256(catLog.output)).toBe(sha256(written.replace(/\n$/, '')));
  for (const id of [cat.sessionId, ...finished.map((f) => f.id)]) await s.process({ action: 'clear', sessionId: id });
  expect(await s.list()).toEqual([]);
  client.close();
}

/** CPU time (user + system) a process has used, in ms, from /proc/<pid>/stat. */
function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(f[11]) + Number(f[12])) * 1000) / 100; // utime, stime in clock ticks (USER_HZ = 100)
}

function summary(ms: number[]) {
  const sorted = [...ms].sort((a, b) => a - b);
  const round = (x: number) => Math.round(x * 100) / 100;
  return { count: sorted.length, p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)), max: round(sorted[sorted.length - 1] ?? NaN) };
}

describe('load', () => {
  it(`${CLIENTS} clients × ${REQUESTS} mixed requests: every answer exact, the registry empty at the end`, async () => {
    const t = performance.now();
    runStart = t;
    const cpu0 = { daemon: cpuMs(d.proc.pid!), clients: process.cpuUsage() };
    await Promise.all(Array.from({ length: CLIENTS }, (_, i) => runClient(i)));
    const wallMs = performance.now() - t;
    const clientsCpu = process.cpuUsage(cpu0.clients);
    // Who was busy: with every client keeping one request out, latency is mostly waiting in line.
    const cpu = { daemonMs: Math.round(cpuMs(d.proc.pid!) - cpu0.daemon), clientsMs: Math.round((clientsCpu.user + clientsCpu.system) / 1000) };
    const status = await c.call('daemon.status');
    expect(status.sessions).toEqual({ running: 0, finished: 0 });

    const all = [...latencies.values()].flat();
    const cheap = [...latencies.entries()].filter(([op]) => !['exec', 'exec-bg', 'kill'].includes(op)).flatMap(([, v]) => v);
    const report = {
      at: new Date().toISOString(),
      node: process.version,
      cpus: cpus().length,
      loadavg: loadavg(),
      clients: CLIENTS,
      requestsPerClient: REQUESTS,
      requests: all.length,
      wallMs: Math.round(wallMs),
      requestsPerSecond: Math.round((all.length / wallMs) * 1000),
      cpu,
      slowest,
      connectMs: summary(connectMs),
      latencyMs: {
        all: summary(all),
        cheap: summary(cheap),
        byRequest: Object.fromEntries([...latencies.entries()].sort().map(([op, v]) => [op, summary(v)])),
      },
    };
    mkdirSync(join(ROOT, '.vitest-tmp'), { recursive: true });
    writeFileSync(join(ROOT, '.vitest-tmp', 'stress-latency.json'), `${JSON.stringify(report, null, 2)}\n`);
    console.log(`load: ${report.requests} requests in ${report.wallMs} ms (${report.requestsPerSecond}/s) on ${report.cpus} cores, load average ${report.loadavg.map((x) => x.toFixed(1)).join(' ')}`);
    console.log(`load: CPU used meanwhile: daemon ${cpu.daemonMs} ms, the 50 clients (one process) ${cpu.clientsMs} ms`);
    console.log(`load latency (ms): all p50 ${report.latencyMs.all.p50} p99 ${report.latencyMs.all.p99}; poll/log/list/status/write/clear p50 ${report.latencyMs.cheap.p50} p99 ${report.latencyMs.cheap.p99}`);
    console.log(`load: connect to first answer (ms): p50 ${report.connectMs.p50} max ${report.connectMs.max}`);
    for (const [op, v] of Object.entries(report.latencyMs.byRequest)) console.log(`  ${op.padEnd(9)} n=${String(v.count).padStart(6)}  p50 ${v.p50}  p99 ${v.p99}  max ${v.max}`);
    console.log(`load: slowest: ${slowest.map((x) => `${x.op}${x.what ? ` (${x.what})` : ''} ${x.ms} ms, sent at ${(x.at / 1000).toFixed(1)} s by client ${x.client}`).join('; ')}`);
    console.log('load: figures written to .vitest-tmp/stress-latency.json');
  }, 600_000);
});
