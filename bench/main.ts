import { execFileSync, spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { capture } from './capture.js';
import { captureShapes } from './capture-shapes.js';
import { execRoundTrip } from './exec-roundtrip.js';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import { loadAvg, machine } from './lib/proc.js';
import { passes, table, type Metric } from './lib/report.js';
import { sessions } from './sessions.js';
import { tails } from './tails.js';
import { approvals } from './approvals.js';
// Interrupts, terminals and stopping: one file each.
import { idleCost } from './idle.js';
import { interruptLatency } from './interrupt-latency.js';
import { readiness } from './readiness.js';
import { killTree } from './kill-tree.js';
import { ptyThroughput } from './pty-throughput.js';
import type { BenchOptions } from './lib/options.js';

const BENCHES: Record<string, (o: BenchOptions) => Promise<Metric[]>> = {
  exec: execRoundTrip,
  capture,
  // Capture as users run it: text and lines, foreground and background, one and four at once.
  'capture-shapes': captureShapes,
  // A planned restart with sessions running (SPEC §19).
  restart: (o) => import('./restart.js').then((m) => m.restartCost(o)),
  sessions,
  // Persistent shells (SPEC §20): a command through one against an exec; 1,000 through one, flat.
  shells: (o) => import('./shells.js').then((m) => m.shellCost(o)),
  // Interrupts, terminals and stopping.
  interrupts: interruptLatency,
  readiness,
  pty: ptyThroughput,
  idle: idleCost,
  'kill-tree': killTree,
  // Sessions as cgroups.
  cgroups: (o) => import('./cgroups.js').then((m) => m.cgroupCost(o)),
  // Request tails on a warmed daemon.
  tails,
  // Approval rules that match nothing cost nothing.
  approvals,
  cli: (o) => import('./cli.js').then((m) => m.cliStartup(o)),
  // The same from the tarball installed with npm, as a user has it.
  'cli-installed': (o) => import('./cli-installed.js').then((m) => m.cliInstalled(o)),
  // Review and undo: reading a session's changes and applying them, against cp -a.
  changes: (o) => import('./changes.js').then((m) => m.changesCost(o)),
  // Review mode's cost against direct writes: exec of true, npm ci.
  review: (o) => import('./review.js').then((m) => m.reviewCost(o)),
  // The audit trail: its cost to exec, verify, and history over a million records.
  audit: (o) => import('./audit.js').then((m) => m.auditCost(o)),
  metrics: (o) => import('./audit.js').then((m) => m.metricsScrape(o)),
  // The OpenTelemetry export's cost to an exec: on, receiver down, off.
  telemetry: (o) => import('./telemetry.js').then((m) => m.telemetryCost(o)),
  // The console: first data with 1,000 sessions, live latency, the daemon's CPU with a page open, page weight.
  console: (o) => import('./console.js').then((m) => m.consoleCost(o)),
  // How long daemon.diagnostics holds other requests, with 1,000 sessions.
  diagnostics: (o) => import('./diagnostics.js').then((m) => m.diagnosticsCost(o)),
  // Credentials a job never sees (SPEC §21): the intercepting proxy against the plain tunnel.
  credentials: (o) => import('./credentials.js').then((m) => m.credentialsCost(o)),
  sandbox: async (o) => [...(await import('./sandbox.js').then((m) => m.sandboxCost(o))), ...(await import('./netproxy.js').then((m) => m.networkCost(o)))],
};

const USAGE = `usage: npm run bench -- [--json FILE] [--only exec,capture,capture-shapes,restart,sessions,shells,interrupts,readiness,pty,idle,kill-tree,cgroups,tails,approvals,cli,cli-installed,changes,review,sandbox,credentials,audit,metrics,telemetry,console,diagnostics] [--rounds N] [--quick] [--cpu-prof DIR] [--daemon-node-arg ARG]... [--daemon-env K=V]...`;

function parseArgs(argv: string[]) {
  const out = { json: undefined as string | undefined, only: Object.keys(BENCHES), rounds: 3, quick: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const value = () => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`${a} needs a value\n${USAGE}`);
      return v;
    };
    if (a === '--json') out.json = value();
    else if (a === '--only') out.only = value().split(',');
    else if (a === '--rounds') out.rounds = Number(value());
    else if (a === '--quick') out.quick = true;
    else if (a === '--cpu-prof') BenchDaemon.nodeArgs.push('--cpu-prof', '--cpu-prof-dir', value());
    else if (a === '--daemon-node-arg') BenchDaemon.nodeArgs.push(value());
    else if (a === '--daemon-env') {
      const [k, ...v] = value().split('=');
      BenchDaemon.extraEnv[k] = v.join('=');
    }
    else if (a === '--help' || a === '-h') {
      process.stdout.write(`${USAGE}\n`);
      process.exit(0);
    } else throw new Error(`unknown argument ${a}\n${USAGE}`);
  }
  const unknown = out.only.find((b) => !(b in BENCHES));
  if (unknown) throw new Error(`unknown benchmark ${unknown}; benchmarks are ${Object.keys(BENCHES).join(', ')}`);
  if (!Number.isInteger(out.rounds) || out.rounds < 1) throw new Error('--rounds must be a positive integer');
  return out;
}

/** The source revision measured: the commit, and whether src/ differs from it (read-only git). */
function revision(): string {
  const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  try {
    return `${git('rev-parse', '--short', 'HEAD')}${git('status', '--porcelain', '--', 'src') ? ' + uncommitted changes in src/' : ''}`;
  } catch {
    return 'unknown';
  }
}

async function main(): Promise<number> {
  const args = parseArgs(process.argv.slice(2));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  const opts: BenchOptions = { rounds: args.rounds, quick: args.quick, log };
  const host = machine();
  const startedAt = new Date();
  const rev = revision();
  log(`procctl bench at ${rev}: ${host.cpus} x ${host.model}, ${host.memGiB} GiB, Linux ${host.kernel}, Node ${host.node}, load ${host.loadavg}, first touch of a page ${host.pageTouchUs} µs`);

  // A benchmark's daemons are stopped (SIGTERM, by pid) however the run ends.
  for (const sig of ['SIGINT', 'SIGTERM'] as const) {
    process.once(sig, () => {
      log(`${sig}: stopping bench daemons`);
      void BenchDaemon.stopAll().finally(() => process.exit(130));
    });
  }

  const metrics: Metric[] = [];
  const errors: string[] = [];
  for (const name of args.only) {
    // What the benches before wrote reaches the disk first: their writeback does not land in this one's rounds.
    spawnSync('sync');
    try {
      metrics.push(...(await BENCHES[name](opts)));
    } catch (err) {
      errors.push(`${name}: ${(err as Error).stack ?? err}`);
      log(`${name} failed: ${(err as Error).message}`);
    } finally {
      await BenchDaemon.stopAll();
    }
  }

  errors.push(...BenchDaemon.survivors);
  process.stdout.write(`\n${table(metrics)}\n`);
  const misses = metrics.filter((m) => passes(m) === false);
  process.stdout.write(`\n${metrics.filter((m) => m.target).length - misses.length} PASS, ${misses.length} MISS${errors.length ? `, ${errors.length} ERROR` : ''}\n`);
  if (args.json) {
    const report = {
      date: startedAt.toISOString(),
      durationS: Math.round((Date.now() - startedAt.getTime()) / 1000),
      revision: rev,
      machine: { ...host, loadavgEnd: loadAvg() },
      rounds: args.rounds,
      quick: args.quick,
      metrics: metrics.map((m) => ({ ...m, pass: passes(m) })),
      errors,
    };
    writeFileSync(args.json, `${JSON.stringify(report, null, 2)}\n`);
    log(`results written to ${args.json}`);
  }
  for (const e of errors) log(e);
  return errors.length ? 1 : 0;
}

main().then(
  (code) => process.exit(code),
  async (err) => {
    process.stderr.write(`bench: ${(err as Error).message}\n`);
    await BenchDaemon.stopAll();
    process.exit(2);
  },
);
