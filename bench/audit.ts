import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { cpuMs } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round } from './lib/stats.js';
import { writeSynthetic } from './lib/trail.js';

const ADMIN = 'bench-admin';
const DAY_MS = 86_400_000;

/**
 * The audit trail (SPEC §18, issue 29): what it costs an exec, how fast it verifies, how fast
 * history finds a day in a million records.
 */
export async function auditCost(opts: BenchOptions): Promise<Metric[]> {
  return [...(await roundTrip(opts)), ...(await verify(opts)), ...(await history(opts))];
}

/**
 * The exec round trip of `true` with the trail on against off: two daemons side by side, one exec
 * on each alternately (which goes first alternating too); a fresh pair each round, so neither
 * daemon's own luck counts as the trail's.
 */
async function roundTrip(opts: BenchOptions): Promise<Metric[]> {
  const iterations = opts.quick ? 60 : 300;
  const warmup = opts.quick ? 10 : 40;
  opts.log(`audit: exec \`true\` with the trail on vs off; ${opts.rounds} rounds x ${iterations} iterations (+${warmup} warm-up), alternating, a fresh pair of daemons each round`);
  const rounds: { on: number[]; off: number[]; onCpu: number; offCpu: number }[] = [];
  for (let r = 0; r < opts.rounds; r++) {
    const on = await BenchDaemon.start({}, {});
    const off = await BenchDaemon.start({}, { audit: { enabled: false } });
    const [con, coff] = await Promise.all([on.client(), off.client()]);
    try {
      const exec = async (c: typeof con) => {
        const t0 = now();
        const x = await c.call('exec', { command: 'true' });
        const ms = now() - t0;
        if (x.status !== 'completed' || x.exitCode !== 0) throw new Error(`exec true answered ${JSON.stringify(x).slice(0, 300)}`);
        await c.call('process', { action: 'clear', sessionId: x.sessionId });
        return ms;
      };
      const s = { on: [] as number[], off: [] as number[], onCpu: 0, offCpu: 0 };
      let cpuOn = 0;
      let cpuOff = 0;
      for (let i = 0; i < warmup + iterations; i++) {
        if (i === warmup) {
          cpuOn = cpuMs(on.pid);
          cpuOff = cpuMs(off.pid);
        }
        const onFirst = i % 2 === 0;
        const a = onFirst ? await exec(con) : 0;
        const b = await exec(coff);
        const c = onFirst ? a : await exec(con);
        if (i >= warmup) {
          s.on.push(c);
          s.off.push(b);
        }
      }
      // The daemon's CPU per exec + clear moves much less with the machine's load than wall time.
      await new Promise((resolve) => setTimeout(resolve, 200));
      s.onCpu = (cpuMs(on.pid) - cpuOn) / iterations;
      s.offCpu = (cpuMs(off.pid) - cpuOff) / iterations;
      const st = await con.call('daemon.status');
      if (!(st.audit?.records >= iterations * 2)) throw new Error(`the trail holds ${st.audit?.records} records, expected at least ${iterations * 2}`);
      rounds.push(s);
      opts.log(`  round ${r + 1}: median ${round(median(s.on), 3)} ms on vs ${round(median(s.off), 3)} ms off (p99 ${round(p99(s.on), 2)} vs ${round(p99(s.off), 2)} ms); daemon CPU per exec + clear ${round(s.onCpu, 3)} vs ${round(s.offCpu, 3)} ms`);
    } finally {
      con.close();
      coff.close();
      await Promise.all([on.stop(), off.stop()]);
    }
  }
  const ratios = rounds.map((s) => median(s.on) / median(s.off));
  const med = (f: (s: (typeof rounds)[number]) => number) => median(rounds.map(f));
  return [
    {
      bench: 'audit',
      name: 'exec round trip, audit trail on ÷ off',
      value: median(ratios),
      unit: 'x',
      target: { op: '<=', value: 1.05 },
      rounds: ratios.map((x) => round(x, 3)),
      detail: `median ${round(med((s) => median(s.on)), 3)} vs ${round(med((s) => median(s.off)), 3)} ms; p99 ${round(med((s) => p99(s.on)), 2)} vs ${round(med((s) => p99(s.off)), 2)} ms; two daemons side by side, alternating`,
    },
    {
      bench: 'audit',
      name: 'daemon CPU per exec + clear, trail on ÷ off',
      value: med((s) => s.onCpu) / med((s) => s.offCpu),
      unit: 'x',
      rounds: rounds.map((s) => round(s.onCpu / s.offCpu, 3)),
      detail: `${round(med((s) => s.onCpu), 3)} vs ${round(med((s) => s.offCpu), 3)} ms (utime + stime of the daemon process, /proc/<pid>/stat)`,
    },
  ];
}

/** `audit.verify` of the trail 10,000 execs leave (their session and end records), through the daemon. */
async function verify(opts: BenchOptions): Promise<Metric[]> {
  const execs = opts.quick ? 1000 : 10_000;
  const d = await BenchDaemon.start({}, { adminToken: ADMIN });
  const c = await d.client();
  try {
    opts.log(`audit: ${execs} execs of \`true\`, then audit.verify of their trail`);
    for (let i = 0; i < execs; i++) {
      const x = await c.call('exec', { command: 'true' });
      await c.call('process', { action: 'clear', sessionId: x.sessionId });
    }
    const times: number[] = [];
    let records = 0;
    for (let i = 0; i < opts.rounds; i++) {
      const t0 = now();
      const v = await c.call('audit.verify', { scope: '*', token: ADMIN });
      times.push(now() - t0);
      if (!v.ok) throw new Error(`the trail does not verify: ${JSON.stringify(v)}`);
      records = v.records;
    }
    opts.log(`  verify: ${times.map((t) => round(t, 1)).join(', ')} ms for ${records} records`);
    return [{ bench: 'audit', name: `audit.verify of ${execs} execs' trail`, value: median(times), unit: 'ms', target: { op: '<', value: 1000 }, rounds: times.map((t) => round(t, 1)), detail: `${records} records, through the daemon (flush, read, hash each line)` }];
  } finally {
    c.close();
    await d.stop();
  }
}

/**
 * `history --since 1d` over 1,000,000 records spread over 30 days (a session and its end each, 5
 * scopes), written in the trail's own format into a daemon's state directory before it starts;
 * asked through the daemon as the operator, newest page of 50. The first ask reads the files
 * from disk (the page cache may still hold them from the writing); later ones are the same ask again.
 */
async function history(opts: BenchOptions): Promise<Metric[]> {
  const records = opts.quick ? 100_000 : 1_000_000;
  const base = mkdtempSync(join(tmpdir(), 'procctl-bench-audit-'));
  const stateDir = join(base, 'state');
  mkdirSync(stateDir, { mode: 0o700 });
  const dir = join(stateDir, 'audit');
  const t0 = now();
  const written = writeSynthetic(dir, records, Date.now() - 30 * DAY_MS, Date.now() - 60_000);
  opts.log(`audit: wrote ${records} records (${round(written.bytes / 1048576, 0)} MiB in ${written.files} files) over 30 days in ${round((now() - t0) / 1000, 1)} s; history --since 1d`);
  const d = await BenchDaemon.start({ PROCCTL_STATE_DIR: stateDir }, { adminToken: ADMIN });
  const c = await d.client();
  try {
    const times: number[] = [];
    let total = 0;
    let scanned = '';
    for (let i = 0; i < Math.max(3, opts.rounds); i++) {
      const t = now();
      const h = await c.call('history', { scope: '*', token: ADMIN, since: '1d', limit: 50 });
      times.push(now() - t);
      total = h.total;
      scanned = `${h.scanned.files} file(s) read, ${h.scanned.skipped} skipped by their times`;
      if (h.sessions.length !== Math.min(50, total)) throw new Error(`history answered ${h.sessions.length} sessions of ${total}`);
    }
    const grep: number[] = [];
    for (let i = 0; i < Math.max(3, opts.rounds); i++) {
      const t = now();
      await c.call('history', { scope: '*', token: ADMIN, since: '1d', grep: 'deploy', status: 'failed' });
      grep.push(now() - t);
    }
    opts.log(`  history --since 1d: ${times.map((x) => round(x, 1)).join(', ')} ms (${total} sessions in the window; ${scanned}); with --grep --status: ${grep.map((x) => round(x, 1)).join(', ')} ms`);
    return [
      {
        bench: 'audit',
        name: `history --since 1d over ${records} records`,
        value: Math.max(...times),
        unit: 'ms',
        target: { op: '<', value: 1000 },
        rounds: times.map((x) => round(x, 1)),
        detail: `worst of ${times.length}, the first cold; ${total} sessions in the window, page of 50; ${scanned}; with --grep and --status ${round(median(grep), 1)} ms`,
      },
    ];
  } finally {
    c.close();
    await d.stop();
    rmSync(base, { recursive: true, force: true });
  }
}

/** A scrape of `/metrics` with 1,000 running sessions (issue 29's figure: <= 50 ms). */
export async function metricsScrape(opts: BenchOptions): Promise<Metric[]> {
  const sessions = opts.quick ? 100 : 1000;
  const port = await new Promise<number>((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const p = (s.address() as { port: number }).port;
      s.close(() => resolve(p));
    });
  });
  const d = await BenchDaemon.start({}, { metrics: { listen: `127.0.0.1:${port}` }, tools: { exec: { maxSessions: sessions + 10 } } });
  const c = await d.client();
  try {
    opts.log(`metrics: ${sessions} running sessions (sleep 600), then GET /metrics`);
    for (let i = 0; i < sessions; i++) {
      const r = await c.call('exec', { command: 'sleep 600', background: true, scope: `bench-${i % 10}` });
      if (r.status !== 'running') throw new Error(`exec answered ${JSON.stringify(r).slice(0, 300)}`);
    }
    const times: number[] = [];
    let size = 0;
    for (let i = 0; i < 5 + opts.rounds * 10; i++) {
      const t = now();
      const body = await scrape(port);
      if (i >= 5) times.push(now() - t);
      size = body.length;
      const running = [...body.matchAll(/^procctl_sessions\{state="running",scope="bench-\d"\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
      if (running !== sessions) throw new Error(`/metrics counted ${running} running sessions, expected ${sessions}`);
    }
    opts.log(`  scrape: median ${round(median(times), 1)} ms, p99 ${round(p99(times), 1)} ms, ${round(size / 1024, 1)} KiB`);
    return [{ bench: 'metrics', name: `scrape of /metrics with ${sessions} running sessions`, value: median(times), unit: 'ms', target: { op: '<=', value: 50 }, rounds: times.map((t) => round(t, 1)), detail: `p99 ${round(p99(times), 1)} ms; ${round(size / 1024, 1)} KiB of text; 10 scopes` }];
  } finally {
    for (let i = 0; i < 10; i++) await c.call('process', { action: 'kill', all: true, scope: `bench-${i}` }).catch(() => undefined);
    c.close();
    await d.stop();
  }
}

function scrape(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path: '/metrics' }, (res) => {
      let body = '';
      res.setEncoding('utf8').on('data', (x: string) => (body += x));
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`/metrics answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end();
  });
}
