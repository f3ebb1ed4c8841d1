import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon, ROOT } from './lib/daemon.js';
import { alive } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, round, sleep } from './lib/stats.js';

/**
 * Benchmark: how long `procctl ps --json` takes from exec to exit, against `node -e 0` (the
 * floor for any Node CLI) and the same question put to pm2 (`pm2 jlist`) and supervisor
 * (`supervisorctl status`), each managing one `sleep` so no one answers an empty list. The four
 * run in turn, round after round, so a loaded machine slows all of them alike; the headline is
 * the median. pm2 comes from npm into a cache outside the project, supervisor from Debian
 * (`apt-get install supervisor`); one that cannot be installed is named and left out.
 */
export async function cliStartup(opts: BenchOptions): Promise<Metric[]> {
  const rounds = opts.quick ? 8 : 20 * opts.rounds;
  // The one-file CLI is part of the build; make sure the run measures a fresh one.
  const bundle = () => execFileSync(process.execPath, [join(ROOT, 'scripts', 'bundle-cli.mjs')], { stdio: ['ignore', 'ignore', 'inherit'] });
  bundle();
  // A `tsc` elsewhere during the run makes it stale (bin/procctl would run the sources): made again.
  let rebuilt = 0;
  const fresh = () => {
    if (cliEntry() === BUNDLED) return;
    bundle();
    rebuilt++;
  };

  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  await client.call('exec', { command: 'sleep 600', background: true });
  client.close();
  const procctl = join(ROOT, 'bin', 'procctl');
  const candidates: Candidate[] = [
    { label: 'node -e 0', argv: [process.execPath, '-e', '0'] },
    { label: 'procctl ps --json', argv: [process.execPath, procctl, '--socket', daemon.socket, 'ps', '--json'], entry: () => cliEntry() },
    { label: 'procctl ps', argv: [process.execPath, procctl, '--socket', daemon.socket, 'ps'] },
  ];
  const missing: string[] = [];
  const stops: (() => Promise<void>)[] = [];
  try {
    for (const start of [startPm2, startSupervisor]) {
      const peer = await start(opts.log);
      if (typeof peer === 'string') missing.push(peer);
      else {
        candidates.push(peer.candidate);
        stops.push(peer.stop);
      }
    }
    opts.log(`cli: ${rounds} rounds of ${candidates.map((c) => `\`${c.label}\``).join(', ')}${missing.length ? `; left out: ${missing.join('; ')}` : ''}`);
    // One warm-up round: page cache, pm2's and supervisord's first answers.
    for (const c of candidates) run(c);
    const times = new Map(candidates.map((c) => [c, [] as number[]]));
    for (let r = 0; r < rounds; r++) {
      fresh();
      for (const c of candidates) times.get(c)!.push(run(c));
    }
    const med = (c: Candidate) => median(times.get(c)!);
    const [node, ps, psText] = candidates;
    const entry = `${ps.entry?.() ?? 'unknown'}${rebuilt ? ` (made again ${rebuilt} time(s) during the run, after a tsc)` : ''}`;
    const metrics: Metric[] = [
      { bench: 'cli', name: 'node -e 0', value: round(med(node), 1), unit: 'ms', rounds: times.get(node)!.map((t) => round(t, 1)), detail: 'the floor: node starting and exiting' },
      {
        bench: 'cli',
        name: 'procctl ps --json',
        value: round(med(ps), 1),
        unit: 'ms',
        rounds: times.get(ps)!.map((t) => round(t, 1)),
        detail: `bin/procctl ran ${entry}; one session listed`,
      },
      { bench: 'cli', name: 'procctl ps', value: round(med(psText), 1), unit: 'ms', detail: 'the table' },
      { bench: 'cli', name: 'ps --json / node -e 0', value: round(med(ps) / med(node), 2), unit: 'x', target: { op: '<=', value: 1.25 }, detail: 'medians' },
    ];
    for (const peer of candidates.slice(3)) {
      metrics.push({ bench: 'cli', name: peer.label, value: round(med(peer), 1), unit: 'ms', rounds: times.get(peer)!.map((t) => round(t, 1)), detail: peer.detail });
      metrics.push({ bench: 'cli', name: `ps --json / ${peer.label}`, value: round(med(ps) / med(peer), 2), unit: 'x', target: { op: '<=', value: 0.6 }, detail: 'medians' });
    }
    for (const name of missing) metrics.push({ bench: 'cli', name: `not measured: ${name}`, value: Number.NaN, unit: '', target: { op: '<=', value: 0.6 } });
    return metrics;
  } finally {
    for (const stop of stops) await stop().catch((err) => opts.log(`cli: ${(err as Error).message}`));
    await daemon.stop();
  }
}

interface Candidate {
  label: string;
  argv: string[];
  env?: NodeJS.ProcessEnv;
  detail?: string;
  /** Which file bin/procctl runs (the bundle, or the compiled sources when it is stale). */
  entry?: () => string;
}

/** Wall-clock ms from spawn to exit; a failed run is an error, not a fast sample. */
function run(c: Candidate): number {
  const t0 = now();
  const r = spawnSync(c.argv[0], c.argv.slice(1), { env: c.env ?? process.env, stdio: ['ignore', 'ignore', 'pipe'] });
  const ms = now() - t0;
  if (r.status !== 0 && !(c.label.startsWith('supervisorctl') && r.status === 3)) {
    throw new Error(`\`${c.label}\` exited ${r.status ?? r.signal}: ${String(r.stderr).slice(0, 300)}`);
  }
  return ms;
}

export const BUNDLED = 'the bundle (dist/src/cli/procctl.cjs)';

/** What bin/procctl under `root` runs now, by its own rule: the bundle's stamp matches the compiled main.js. */
export function cliEntry(root = ROOT): string {
  const dir = join(root, 'dist', 'src', 'cli');
  try {
    const { sources } = JSON.parse(readFileSync(join(dir, 'procctl.cjs.json'), 'utf8')) as { sources?: string };
    if (readFileSync(join(dir, 'main.js'), 'utf8').endsWith(`//# procctl-bundle ${sources}\n`)) return BUNDLED;
  } catch {
    // no stamp, or no sources
  }
  return 'the compiled sources: the bundle was stale';
}

function onPath(name: string, path = process.env.PATH ?? ''): string | undefined {
  for (const dir of path.split(delimiter)) if (dir && existsSync(join(dir, name))) return join(dir, name);
  return undefined;
}

type Peer = { candidate: Candidate; stop: () => Promise<void> } | string;

/** Where installed tools are kept between runs: outside the project and its dependencies. */
const TOOLS = join(tmpdir(), 'procctl-bench-tools');

/** pm2 from PATH, else from npm into TOOLS; its daemon under a PM2_HOME of its own, with one `sleep`. */
async function startPm2(log: (line: string) => void): Promise<Peer> {
  let pm2 = onPath('pm2');
  if (!pm2) {
    const prefix = join(TOOLS, 'pm2');
    pm2 = join(prefix, 'node_modules', '.bin', 'pm2');
    if (!existsSync(pm2)) {
      log(`cli: installing pm2 from npm into ${prefix}`);
      mkdirSync(prefix, { recursive: true });
      const r = spawnSync('npm', ['install', '--prefix', prefix, '--no-audit', '--no-fund', '--no-save', 'pm2@latest'], { encoding: 'utf8' });
      if (r.status !== 0 || !existsSync(pm2)) return `pm2 (npm install failed: ${(r.stderr || r.error?.message || '').trim().split('\n').pop()})`;
    }
  }
  const home = mkdtempSync(join(tmpdir(), 'procctl-bench-pm2-'));
  const env = { ...process.env, PM2_HOME: home };
  const pm2Run = (...args: string[]) => spawnSync(process.execPath, [pm2!, ...args], { env, encoding: 'utf8' });
  const started = pm2Run('start', 'sleep', '--name', 'bench-sleep', '--', '600');
  if (started.status !== 0) return `pm2 (could not start its daemon: ${started.stderr.trim().split('\n').pop()})`;
  const version = pm2Run('--version').stdout.trim().split('\n').pop();
  return {
    candidate: { label: 'pm2 jlist', argv: [process.execPath, pm2, 'jlist'], env, detail: `pm2 ${version}, one process` },
    stop: async () => {
      // pm2 kill stops the daemon of this PM2_HOME and its process; nothing else.
      const pid = readPid(join(home, 'pm2.pid'));
      pm2Run('kill');
      await gone(pid, 'the pm2 daemon');
      rmSync(home, { recursive: true, force: true });
    },
  };
}

/** supervisord from PATH, else from Debian (apt-get), with its own config, socket and one `sleep`. */
async function startSupervisor(log: (line: string) => void): Promise<Peer> {
  if (!onPath('supervisord') || !onPath('supervisorctl')) {
    log('cli: installing supervisor from Debian (apt-get install -y supervisor)');
    const apt = (...args: string[]) => spawnSync('apt-get', args, { encoding: 'utf8', env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' } });
    let r = apt('install', '-y', '--no-install-recommends', 'supervisor');
    if (r.status !== 0) {
      apt('update');
      r = apt('install', '-y', '--no-install-recommends', 'supervisor');
    }
    if (r.status !== 0 || !onPath('supervisorctl')) {
      return `supervisorctl (apt-get install supervisor failed: ${(r.stderr || r.error?.message || 'not found after install').trim().split('\n').pop()})`;
    }
  }
  const dir = mkdtempSync(join(tmpdir(), 'procctl-bench-supervisor-'));
  const conf = join(dir, 'supervisord.conf');
  writeFileSync(
    conf,
    [
      '[unix_http_server]',
      `file=${join(dir, 'supervisor.sock')}`,
      '[supervisord]',
      `pidfile=${join(dir, 'supervisord.pid')}`,
      `logfile=${join(dir, 'supervisord.log')}`,
      `childlogdir=${dir}`,
      '[rpcinterface:supervisor]',
      'supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface',
      '[supervisorctl]',
      `serverurl=unix://${join(dir, 'supervisor.sock')}`,
      '[program:bench-sleep]',
      'command=sleep 600',
      '',
    ].join('\n'),
  );
  const started = spawnSync(onPath('supervisord')!, ['-c', conf], { encoding: 'utf8' });
  if (started.status !== 0) return `supervisorctl (supervisord did not start: ${started.stderr.trim().split('\n').pop()})`;
  const ctl = onPath('supervisorctl')!;
  const deadline = Date.now() + 20_000;
  while (spawnSync(ctl, ['-c', conf, 'status'], { encoding: 'utf8' }).stdout.includes('RUNNING') === false) {
    if (Date.now() > deadline) return 'supervisorctl (supervisord did not run its program within 20 s)';
    await sleep(100);
  }
  const version = spawnSync(ctl, ['-c', conf, 'version'], { encoding: 'utf8' }).stdout.trim();
  return {
    candidate: { label: 'supervisorctl status', argv: [ctl, '-c', conf, 'status'], detail: `supervisor ${version}, one program` },
    stop: async () => {
      const pid = readPid(join(dir, 'supervisord.pid'));
      spawnSync(ctl, ['-c', conf, 'shutdown'], { encoding: 'utf8' });
      await gone(pid, 'supervisord');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function readPid(file: string): number | undefined {
  try {
    return Number(readFileSync(file, 'utf8').trim()) || undefined;
  } catch {
    return undefined;
  }
}

/** Wait for a daemon we started to exit; SIGKILL it by pid after 10 s. */
async function gone(pid: number | undefined, what: string): Promise<void> {
  if (pid === undefined) return;
  const deadline = Date.now() + 10_000;
  while (alive(pid) && Date.now() < deadline) await sleep(50);
  if (!alive(pid)) return;
  process.kill(pid, 'SIGKILL');
  throw new Error(`${what} (pid ${pid}) did not stop when asked; killed`);
}
