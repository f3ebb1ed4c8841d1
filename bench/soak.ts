import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import { alive, liveProcesses, loadAvg, machine } from './lib/proc.js';
import { round, sleep } from './lib/stats.js';
import { startAgent } from './soak/agent.js';
import { MIX } from './soak/mix.js';
import { churnSubscribers, observe, subscribeAll } from './soak/observers.js';
import type { ProbeReading } from './soak/probe.js';
import { Recorder } from './soak/record.js';
import { HeapSnapshots } from './soak/snapshot.js';
import { soakFigure } from './soak/figure.js';
import { summarise, text, verdict, type Quiet } from './soak/report.js';
import { fdCount, rssAnonMB, rssMB, Sampler, type Sample } from './soak/sampler.js';
import type { BenchClient } from './lib/client.js';

/**
 * The soak: one real daemon under a steady, moderate mix of agent work for a long time, sampled
 * every few seconds, to show that it stays flat. Not part of CI; `npm run soak -- --minutes 5`.
 */

const USAGE = `usage: npm run soak -- [--minutes N] [--agents N] [--pace MS] [--sample-sec S] [--diag-sec S] [--seed N] [--json FILE] [--svg FILE] [--cpu-prof DIR] [--heap-snapshots DIR]`;

/** The daemon's config for the soak: spools rotate at 1 MiB, finished sessions are reaped after a minute. */
const DAEMON_ENV = { PROCCTL_MAX_LOG_BYTES: String(1 << 20), PROCCTL_JOB_TTL_MS: '60000' };

function parseArgs(argv: string[]) {
  const out = { minutes: 30, agents: 6, paceMs: 300, sampleSec: 5, diagSec: 60, seed: 1, json: join(ROOT, 'docs', 'soak.json'), svg: join(ROOT, 'docs', 'soak.svg'), snapshots: undefined as HeapSnapshots | undefined };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${USAGE}`);
      return v;
    };
    const num = () => {
      const n = Number(value());
      if (!Number.isFinite(n) || n <= 0) throw new Error(`${a} needs a positive number\n${USAGE}`);
      return n;
    };
    if (a === '--minutes') out.minutes = num();
    else if (a === '--agents') out.agents = Math.round(num());
    else if (a === '--pace') out.paceMs = num();
    else if (a === '--sample-sec') out.sampleSec = num();
    else if (a === '--diag-sec') out.diagSec = num();
    else if (a === '--seed') out.seed = Math.round(num());
    else if (a === '--json') out.json = resolve(value());
    else if (a === '--svg') out.svg = resolve(value());
    else if (a === '--heap-snapshots') out.snapshots = new HeapSnapshots(resolve(value()));
    else if (a === '--cpu-prof') BenchDaemon.nodeArgs.push('--cpu-prof', '--cpu-prof-dir', resolve(value()));
    else if (a === '--help' || a === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  return out;
}

/** The commit measured, and whether src/ differs from it. */
function revision(): string {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', 'src') ? ' + uncommitted changes in src/' : ''}`;
  } catch {
    return 'unknown';
  }
}

/** Stop every session of the given scopes and forget them all; then the daemon should hold nothing per session. */
async function forgetEverything(client: BenchClient, scopes: string[]): Promise<void> {
  for (const scope of scopes) {
    await client.call('process', { action: 'kill', all: true, scope });
    const { sessions } = await client.call('process', { action: 'list', scope });
    for (const s of sessions) {
      try {
        await client.call('process', { action: 'clear', sessionId: s.sessionId, scope });
      } catch (err) {
        // Reaped by its TTL since the list.
        if ((err as { rpc?: any }).rpc?.data?.kind !== 'not_found') throw err;
      }
    }
  }
}

async function quietFigures(daemon: BenchDaemon, sampler: Sampler): Promise<Quiet> {
  // Spool closes and record writes finish off the main thread: let them land.
  await sleep(2000);
  const d = await sampler.diagnostics(true);
  return { rssMB: rssMB(daemon.pid), rssAnonMB: rssAnonMB(daemon.pid), fds: fdCount(daemon.pid), heapUsedMB: d.heapUsedMB!, objects: d.objects!, resources: d.resources! };
}

/** The daemon's guardian helper: its child running guardian.js. */
function guardianOf(pid: number): number | undefined {
  for (const p of liveProcesses({ ppids: new Set([pid]) })) {
    try {
      if (readFileSync(`/proc/${p.pid}/cmdline`, 'latin1').includes('guardian')) return p.pid;
    } catch {
      // gone meanwhile
    }
  }
  return undefined;
}

/** The report, indented; its samples one per line (a 30-minute run has 360); every probe round trip, [s into the load, ms], on one line. */
function reportJson(report: Record<string, unknown>, samples: Sample[], probes: [number, number][]): string {
  const head = JSON.stringify(report, null, 1);
  const rows = samples.map((s) => `  ${JSON.stringify(s)}`).join(',\n');
  return `${head.slice(0, -2)},\n "samples": [\n${rows}\n ],\n "probes": ${JSON.stringify(probes)}\n}\n`;
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const host = machine();
  const rev = revision();
  const startedAt = new Date();
  log(`procctl soak at ${rev}: ${args.minutes} min, ${args.agents} agents, pace ${args.paceMs} ms; ${host.cpus} x ${host.model}, Node ${host.node}, load ${host.loadavg}`);

  let stopping = false;
  let probe: Worker | undefined;
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      log(`${sig}: stopping the soak daemon and its sessions`);
      stopping = true;
      void probe?.terminate();
      void BenchDaemon.stopAll().finally(() => process.exit(130));
    });
  }

  if (args.snapshots) BenchDaemon.nodeArgs.push(...args.snapshots.nodeArgs());
  const daemon = await BenchDaemon.start(DAEMON_ENV);
  const workdir = join(daemon.dir, 'work');
  mkdirSync(workdir);
  const socket = daemon.socket;
  const rec = new Recorder();
  const isStopping = () => stopping;
  const agentScopes = Array.from({ length: args.agents }, (_, i) => `agent-${i + 1}`);
  const observerScopes = ['observer-1', 'observer-2'];
  const common = { socket, workdir, scopes: agentScopes, rec, stopping: isStopping, log };

  const control = await daemon.client();
  // daemon.diagnostics (without the object counts) is cheap, but its figures change slowly: not every sample.
  const sampler = new Sampler(daemon.pid, guardianOf(daemon.pid), control, Math.max(1, Math.round(args.diagSec / args.sampleSec)));
  probe = new Worker(new URL('./soak/probe.js', import.meta.url), { workerData: { socket, intervalMs: 1000 } });
  probe.on('message', (r: ProbeReading) => sampler.addProbe(r));
  probe.on('error', (err) => rec.fail('probe', 'probe', err));
  await new Promise((r) => probe!.once('message', r));

  // What the daemon sets up once, on first use, belongs in the baseline: one terminal session.
  const warm = await control.call('exec', { command: 'true', pty: true, scope: 'warm-up', workdir });
  await control.call('process', { action: 'clear', sessionId: warm.sessionId, scope: 'warm-up' });
  // Measured with only the control and probe connections open, as at the end.
  const quietStart = await quietFigures(daemon, sampler);
  // Snapshots are taken while no sample is being made: before the load, as it ends, and after it.
  // Each takes tens of MB in the daemon, which the allocator keeps: RSS is read before them.
  if (args.snapshots) {
    await args.snapshots.take(daemon.pid, control);
    // Restart the daemon's loop-delay watch, which would count the snapshot's pause.
    await sampler.diagnostics();
  }
  log(`quiet before the load: RSS ${quietStart.rssMB} MB (${quietStart.rssAnonMB} anonymous), ${quietStart.fds} descriptors, heap ${quietStart.heapUsedMB} MB`);
  const subscribers = await Promise.all(agentScopes.map((scope) => subscribeAll(scope, common)));

  rec.startedAt = Date.now();
  sampler.begin(rec.startedAt);
  const agents = await Promise.all(
    agentScopes.map((name, i) => startAgent(name, { socket, workdir, seed: args.seed * 1000 + i, paceMs: args.paceMs, mix: MIX }, rec, isStopping, log)),
  );
  const others = [
    ...observerScopes.map((name, i) => observe(name, args.seed * 2000 + i, 700, common)),
    churnSubscribers(args.seed * 3000, common),
    ...subscribers.map((s) => s.done),
  ];

  const loadMs = args.minutes * 60_000;
  const until = rec.startedAt + loadMs;
  let nextReport = 0;
  let crashed = false;
  while (!stopping) {
    // The last window may be a little longer, never a sliver.
    const left = until - Date.now();
    if (left < 1000) break;
    await sleep(left < args.sampleSec * 1500 ? left : args.sampleSec * 1000);
    let s: Sample;
    try {
      if (!alive(daemon.pid)) throw new Error('not running');
      s = await sampler.sample();
    } catch (err) {
      if (alive(daemon.pid)) throw err;
      crashed = true;
      rec.fail('daemon', 'exit', new Error(`the daemon exited ${round(rec.elapsedS(), 1)} s into the load; its last output: ${daemon.log.slice(-3000)}`));
      log(`! the daemon exited; its last output:\n${daemon.log.slice(-3000)}`);
      break;
    }
    if (s.t >= nextReport) {
      nextReport += 60;
      log(
        `${(s.t / 60).toFixed(1)} min: RSS ${s.rssMB} MB, ${s.fds} fds, ${s.running} running / ${s.finished} finished, ` +
          `daemon CPU ${s.cpuPct}%, soak in all ${s.totalCpuPct}%, machine ${s.machineBusyPct}%, loop p50 ${s.loop.p50} ms max ${s.loop.max} ms, failures ${rec.failureCount}`,
      );
    }
  }
  const loadSeconds = (Date.now() - rec.startedAt) / 1000;
  if (stopping) return 130;

  log('load over: waiting for the agents to finish their tasks');
  if (!crashed) await args.snapshots?.take(daemon.pid, control);
  stopping = true;
  await Promise.race([Promise.all([...agents.map((a) => a.done), ...others]), sleep(90_000)]);
  for (const a of agents) a.agent.events.close();
  if (!crashed) await forgetEverything(control, [...agentScopes, ...observerScopes]);
  const quietEnd = crashed ? { rssMB: Number.NaN, rssAnonMB: Number.NaN, fds: Number.NaN, heapUsedMB: Number.NaN, objects: {}, resources: {} } : await quietFigures(daemon, sampler);
  log(`quiet after the load: RSS ${quietEnd.rssMB} MB (${quietEnd.rssAnonMB} anonymous), ${quietEnd.fds} descriptors, heap ${quietEnd.heapUsedMB} MB, objects ${JSON.stringify(quietEnd.objects)}`);
  if (!crashed && args.snapshots) {
    await args.snapshots.take(daemon.pid, control);
    log(`heap snapshots (before the load, as it ended, after it) in ${args.snapshots.dir}`);
  }

  probe.postMessage('stop');
  await probe.terminate();
  sampler.stop();
  control.close();
  await daemon.stop();
  const daemonLog = daemon.log
    .split('\n')
    .filter((l) => /"level":(40|50|60)/.test(l))
    .slice(-20);
  if (daemonLog.some((l) => /"level":(50|60)/.test(l))) rec.fail('daemon', 'log', new Error(`the daemon logged errors: ${daemonLog.join(' | ').slice(0, 500)}`));

  const quiet = { start: quietStart, end: quietEnd };
  const sessionsStarted = subscribers.reduce((n, s) => n + (s.counts.started ?? 0), 0);
  const summary = summarise(sampler.samples, { all: sampler.allLoop, errors: sampler.probeErrors, skipped: sampler.skippedProbes }, quiet, loadSeconds, sessionsStarted);
  const reasons = verdict(summary, quiet, rec.failureCount, BenchDaemon.survivors);
  const tasks = rec.taskTable();
  const report = {
    date: startedAt.toISOString(),
    revision: rev,
    machine: { ...host, loadavgEnd: loadAvg() },
    options: { minutes: args.minutes, agents: args.agents, paceMs: args.paceMs, sampleSec: args.sampleSec, diagSec: args.diagSec, seed: args.seed, probeIntervalMs: 1000, daemonEnv: DAEMON_ENV },
    mix: MIX.map(([task, weight]) => ({ task, weight })),
    pass: reasons.length === 0,
    reasons,
    summary,
    quiet,
    tasks,
    events: Object.fromEntries(agentScopes.map((scope, i) => [scope, subscribers[i].counts])),
    failures: { count: rec.failureCount, first: rec.failures },
    daemonWarnings: daemonLog,
  };
  writeFileSync(args.json, reportJson(report, sampler.samples, sampler.allLoop));
  const subtitle = `${startedAt.toISOString().slice(0, 10)}, ${rev}, ${round(loadSeconds / 60, 1)} min, ${args.agents} agents, ${host.cpus} cores, Node ${host.node}: ${reasons.length ? 'FAIL' : 'PASS'}`;
  writeFileSync(args.svg, soakFigure(sampler.samples, summary, subtitle, args.diagSec));
  process.stdout.write(`\n${text(summary, quiet, tasks, reasons)}\n`);
  if (rec.failures.length) {
    process.stdout.write(`\nfailures (${rec.failureCount}; the first ${Math.min(20, rec.failures.length)}):\n`);
    for (const f of rec.failures.slice(0, 20)) process.stdout.write(`  ${f.atS} s ${f.who} ${f.task} ${f.kind}: ${f.message}\n`);
  }
  log(`samples written to ${args.json}, plot to ${args.svg}`);
  return reasons.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (err) => {
    process.stderr.write(`soak: ${(err as Error).stack ?? err}\n`);
    await BenchDaemon.stopAll();
    process.exit(2);
  },
);
