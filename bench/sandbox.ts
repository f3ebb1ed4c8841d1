import { spawn } from 'node:child_process';
import type { BenchOptions } from './lib/options.js';
import { execTrue, type BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import type { Metric } from './lib/report.js';
import { daemonShell } from './lib/shell.js';
import { median, now, p99, round } from './lib/stats.js';
import { closeSync, openSync } from 'node:fs';
import { which } from '../src/sandbox/programs.js';
import { unixSocketFilter } from '../src/sandbox/seccomp.js';

/**
 * The cost of the sandbox (SPEC §12): a foreground `exec` of `true` on a sandboxed daemon
 * (workspace-write, no network) against the same on an unsandboxed one, and against running
 * `bwrap <the same options> -- true` by hand from this process. Iterations alternate them, so
 * load on a shared machine hits them alike. The sandbox should add little more than the
 * sandbox's own programs cost: (sandboxed - unsandboxed) against (the session's exact command
 * line by hand - the shell by hand). That command line is bwrap with the daemon's options and
 * seccomp filter, and inside it `env --default-signal` (which gives the job the signals bwrap's
 * processes ignore) running the shell: what any sandboxed session must run, so the ratio is what
 * the daemon adds to it.
 */
export async function sandboxCost(opts: BenchOptions): Promise<Metric[]> {
  const bwrap = which('bwrap', process.env.PATH);
  const env = which('env', process.env.PATH) ?? '/usr/bin/env';
  if (!bwrap) throw new Error('bwrap is not installed (Debian: apt-get install -y bubblewrap); the sandbox bench needs it');
  const iterations = opts.quick ? 30 : 150;
  const warmup = opts.quick ? 5 : 20;
  const plain = await BenchDaemon.start();
  const boxed = await BenchDaemon.start({}, { sandbox: { mode: 'workspace-write', workspaces: [process.cwd()] } });
  const { shell, args } = daemonShell(plain.env, 'true');
  opts.log(`sandbox: exec of true, sandboxed vs unsandboxed daemon vs bwrap by hand; ${opts.rounds} rounds x ${iterations} iterations (+${warmup} warm-up)`);
  const a = await plain.client();
  const b = await boxed.client();
  // By hand, bwrap gets the very options the daemon gave a session (its mounts, hidden paths and
  // protect binds, read from the sandbox's own PID 1, which is bwrap) and the same seccomp filter.
  const options = await sessionOptions(b);
  const rounds: { plain: number[]; boxed: number[]; bwrap: number[]; bwrapShell: number[]; asDaemon: number[]; shell: number[] }[] = [];
  try {
    for (let r = 0; r < opts.rounds; r++) {
      const s = { plain: [] as number[], boxed: [] as number[], bwrap: [] as number[], bwrapShell: [] as number[], asDaemon: [] as number[], shell: [] as number[] };
      for (let i = 0; i < warmup + iterations; i++) {
        // Rotate the order each iteration so no one of them always runs first.
        const runs: [keyof typeof s, () => Promise<number>][] = [
          ['plain', () => execTrue(a)],
          ['boxed', () => execTrue(b)],
          ['bwrap', () => withFds((fds) => byHand(bwrap, [...options, '--', 'true'], fds))],
          ['bwrapShell', () => withFds((fds) => byHand(bwrap, [...options, '--', shell, ...args], fds))],
          // Exactly what a sandboxed session runs (the job gets its signals back through env).
          ['asDaemon', () => withFds((fds) => byHand(bwrap, [...options, '--', env, '--default-signal', shell, ...args], fds))],
          ['shell', () => byHand(shell, args)],
        ];
        for (let k = 0; k < runs.length; k++) {
          const [name, run] = runs[(i + k) % runs.length];
          const ms = await run();
          if (i >= warmup) s[name].push(ms);
        }
      }
      rounds.push(s);
      opts.log(
        `  round ${r + 1}: sandboxed ${round(median(s.boxed), 2)} ms, unsandboxed ${round(median(s.plain), 2)} ms, ` +
          `bwrap true by hand ${round(median(s.bwrap), 2)} ms, bwrap ${shell} by hand ${round(median(s.bwrapShell), 2)} ms, ${shell} by hand ${round(median(s.shell), 2)} ms`,
      );
    }
  } finally {
    a.close();
    b.close();
    await plain.stop();
    await boxed.stop();
  }

  const med = (k: keyof (typeof rounds)[number]) => median(rounds.map((s) => median(s[k])));
  const added = rounds.map((s) => median(s.boxed) - median(s.plain));
  const bwrapOwn = rounds.map((s) => median(s.asDaemon) - median(s.shell));
  const ratio = rounds.map((_, i) => added[i] / bwrapOwn[i]);
  // What the daemon adds around the same command, with the sandbox and without it.
  const daemonBoxed = rounds.map((s) => median(s.boxed) - median(s.asDaemon));
  const daemonPlain = rounds.map((s) => median(s.plain) - median(s.shell));
  return [
    {
      bench: 'sandbox',
      name: 'sandboxed exec of `true`, median',
      value: med('boxed'),
      unit: 'ms',
      rounds: rounds.map((s) => round(median(s.boxed), 2)),
      detail: `p99 ${round(median(rounds.map((s) => p99(s.boxed))), 2)} ms; workspace-write, no network`,
    },
    {
      bench: 'sandbox',
      name: 'unsandboxed exec of `true`, median',
      value: med('plain'),
      unit: 'ms',
      rounds: rounds.map((s) => round(median(s.plain), 2)),
    },
    {
      bench: 'sandbox',
      name: '`bwrap <same options> true` by hand, median',
      value: med('bwrap'),
      unit: 'ms',
      rounds: rounds.map((s) => round(median(s.bwrap), 2)),
      detail: `bwrap running ${shell} -c true: ${round(med('bwrapShell'), 2)} ms; ${shell} alone: ${round(med('shell'), 2)} ms`,
    },
    {
      bench: 'sandbox',
      name: 'added by the sandbox / its command line by hand',
      value: median(ratio),
      unit: 'x',
      target: { op: '<=', value: 1.25 },
      rounds: ratio.map((x) => round(x, 3)),
      detail: `sandboxed - unsandboxed = ${round(median(added), 2)} ms; bwrap, env and the shell by hand - the shell by hand = ${round(median(bwrapOwn), 2)} ms, of which env giving the job its signals back ${round(med('asDaemon') - med('bwrapShell'), 2)} ms`,
    },
    {
      bench: 'sandbox',
      name: 'daemon overhead per exec, sandboxed vs unsandboxed',
      value: median(daemonBoxed) - median(daemonPlain),
      unit: 'ms',
      rounds: rounds.map((_, i) => round(daemonBoxed[i] - daemonPlain[i], 2)),
      detail: `sandboxed exec - its exact command line by hand = ${round(median(daemonBoxed), 2)} ms; unsandboxed exec - the shell by hand = ${round(median(daemonPlain), 2)} ms`,
    },
  ];
}


/**
 * The bwrap options, up to `--`, of a session the sandboxed daemon starts: its PID 1 inside is
 * bwrap's own init, whose command line is the daemon's. The filter's descriptor becomes fd 3, and
 * the one bwrap writes the job's exit status to (where the daemon keeps it for a restart) fd 4.
 */
async function sessionOptions(client: BenchClient): Promise<string[]> {
  const r = await client.call('exec', { command: 'cat /proc/1/cmdline' });
  const argv = String(r.output).split('\0').slice(1);
  const end = argv.indexOf('--');
  if (r.status !== 'completed' || end < 0) throw new Error(`could not read the sandbox's bwrap options: ${JSON.stringify(r).slice(0, 300)}`);
  const options = argv.slice(0, end);
  const at = options.indexOf('--seccomp');
  if (at >= 0) options[at + 1] = String(FILTER_FD);
  const status = options.indexOf('--json-status-fd');
  if (status >= 0) options[status + 1] = String(STATUS_FD);
  return options;
}

/** Where the by-hand bwrap finds the session's seccomp filter and writes the job's status. */
const FILTER_FD = 3;
const STATUS_FD = 4;

/** Run with a fresh seccomp filter descriptor (bwrap reads it to its end) and a status descriptor (on /dev/null), closed after. */
async function withFds(run: (fds: number[]) => Promise<number>): Promise<number> {
  const filter = unixSocketFilter();
  const status = openSync('/dev/null', 'w');
  try {
    return await run([filter, status]);
  } finally {
    closeSync(filter);
    closeSync(status);
  }
}

/**
 * Spawn and wait, in a process group of its own on pipes, as the daemon would; `fds` from fd 3 on.
 * A bwrap that fails after it started its sandbox's first process leaves that process holding the
 * pipes: the group is killed once the leader exits non-zero, so the failure is told (with what it
 * printed) and nothing of it is left.
 */
function byHand(file: string, args: string[], fds: number[] = []): Promise<number> {
  return new Promise((resolve, reject) => {
    const t0 = now();
    const child = spawn(file, args, { detached: true, stdio: ['pipe', 'pipe', 'pipe', ...fds] });
    let said = '';
    child.stdout!.resume();
    child.stderr!.setEncoding('utf8').on('data', (text: string) => (said = (said + text).slice(-2000)));
    child.once('error', reject);
    child.once('exit', (code) => {
      if (code === 0) return;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    });
    child.once('close', (code) => (code === 0 ? resolve(now() - t0) : reject(new Error(`${file} exited with ${code}${said ? `: ${said.trim()}` : ''}`))));
  });
}
