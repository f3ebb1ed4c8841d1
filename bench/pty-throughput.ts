import { createRequire } from 'node:module';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { exitWaits } from './lib/sessions.js';
import { cpuMs } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { daemonShell } from './lib/shell.js';
import { median, now, round } from './lib/stats.js';

type NodePty = typeof import('@lydell/node-pty');

/**
 * Benchmark: output throughput of a terminal session. The daemon runs the command with
 * `pty: true` (backgrounded; the clock stops at its `exited` event); the baseline, in the same
 * round and alternating order, is node-pty used directly by the bench with the daemon's shell,
 * arguments, terminal size, environment and raw-byte reads, discarding the output until exit.
 */
export async function ptyThroughput(opts: BenchOptions): Promise<Metric[]> {
  const bytes = opts.quick ? 50_000_000 : 200_000_000;
  const roundsWanted = opts.quick ? opts.rounds : Math.max(opts.rounds, 3);
  const command = `head -c ${bytes} /dev/zero | tr '\\0' a`;
  const pty = createRequire(import.meta.url)('@lydell/node-pty') as NodePty;
  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  const waitExit = await exitWaits(client);
  opts.log(`pty: \`${command}\` (${bytes / 1e6} MB) under a terminal; ${roundsWanted} rounds, daemon vs node-pty in the bench`);

  const rounds: { daemonMs: number; bareMs: number; daemonCpuMs: number; bareCpuMs: number; daemonChars: number; bareChars: number }[] = [];
  try {
    // Warm-up: code loading and JIT on both sides.
    await viaDaemon(`head -c 5000000 /dev/zero | tr '\\0' a`);
    await viaNodePty(`head -c 5000000 /dev/zero | tr '\\0' a`);
    for (let r = 0; r < roundsWanted; r++) {
      const x = { daemonMs: 0, bareMs: 0, daemonCpuMs: 0, bareCpuMs: 0, daemonChars: 0, bareChars: 0 };
      const order = r % 2 === 0 ? ['daemon', 'bare'] : ['bare', 'daemon'];
      for (const which of order) {
        if (which === 'daemon') {
          const cpu0 = cpuMs(daemon.pid);
          const run = await viaDaemon(command);
          x.daemonMs = run.ms;
          x.daemonChars = run.chars;
          x.daemonCpuMs = cpuMs(daemon.pid) - cpu0;
        } else {
          const cpu0 = process.cpuUsage();
          const run = await viaNodePty(command);
          const cpu = process.cpuUsage(cpu0);
          x.bareMs = run.ms;
          x.bareChars = run.chars;
          x.bareCpuMs = (cpu.user + cpu.system) / 1000;
        }
      }
      rounds.push(x);
      opts.log(
        `  round ${r + 1}: daemon ${mbps(bytes, x.daemonMs)} MB/s, node-pty ${mbps(bytes, x.bareMs)} MB/s; ` +
          `CPU daemon ${Math.round(x.daemonCpuMs)} ms vs node-pty reader ${Math.round(x.bareCpuMs)} ms; ` +
          `characters missing at the end: daemon ${bytes - x.daemonChars}, node-pty ${bytes - x.bareChars}`,
      );
    }
  } finally {
    client.close();
    await daemon.stop();
  }

  async function viaDaemon(cmd: string): Promise<{ ms: number; chars: number }> {
    const t0 = now();
    const started = await client.call('exec', { command: cmd, pty: true, background: true });
    if (started.warnings?.length) throw new Error(`the daemon ran without a terminal: ${started.warnings.join('; ')}`);
    const ev = await waitExit(started.sessionId);
    const ms = now() - t0;
    if (ev.status !== 'completed' || ev.exitCode !== 0) throw new Error(`pty session ended ${JSON.stringify(ev).slice(0, 300)}`);
    // Everything the session saw: what the log holds plus what it no longer does.
    const log = await client.call('process', { action: 'log', sessionId: started.sessionId, limit: 0 });
    await client.call('process', { action: 'clear', sessionId: started.sessionId });
    return { ms, chars: log.totalChars + log.droppedChars };
  }

  function viaNodePty(cmd: string): Promise<{ ms: number; chars: number }> {
    const { shell, args } = daemonShell(daemon.env, cmd);
    return new Promise((resolve) => {
      const t0 = now();
      // Raw bytes, as the daemon reads them: no decoding on this side.
      const term = pty.spawn(shell, args, { name: 'xterm-256color', cols: 120, rows: 30, cwd: process.cwd(), env: daemon.env as Record<string, string>, encoding: null });
      let chars = 0;
      term.onData((d: string | Buffer) => (chars += d.length));
      term.onExit(() => resolve({ ms: now() - t0, chars }));
    });
  }

  const vsBare = rounds.map((x) => x.bareMs / x.daemonMs);
  const med = (f: (x: (typeof rounds)[number]) => number) => median(rounds.map(f));
  const short = (f: (x: (typeof rounds)[number]) => number) => rounds.filter((x) => f(x) < bytes).length;
  const losses =
    short((x) => x.daemonChars) || short((x) => x.bareChars)
      ? `; output cut short at exit in ${short((x) => x.daemonChars)} daemon and ${short((x) => x.bareChars)} node-pty runs (node-pty loses the tail of a terminal's output at exit)`
      : '; every character arrived on both sides';
  return [
    {
      bench: 'pty',
      name: 'terminal output throughput vs node-pty',
      value: median(vsBare),
      unit: 'x',
      target: { op: '>=', value: 0.8 },
      rounds: vsBare.map((v) => round(v, 3)),
      detail: `daemon ${mbps(bytes, med((x) => x.daemonMs))} MB/s vs node-pty alone ${mbps(bytes, med((x) => x.bareMs))} MB/s; ${bytes / 1e6} MB through a 120x30 terminal, exec to exit${losses}`,
    },
    {
      bench: 'pty',
      name: 'CPU, daemon vs node-pty reader',
      value: median(rounds.map((x) => x.daemonCpuMs / x.bareCpuMs)),
      unit: 'x',
      rounds: rounds.map((x) => round(x.daemonCpuMs / x.bareCpuMs, 3)),
      detail: `daemon ${Math.round(med((x) => x.daemonCpuMs))} ms vs ${Math.round(med((x) => x.bareCpuMs))} ms of CPU (user+sys) for the run: capture, caps, spool and events cost`,
    },
  ];
}

const mbps = (bytes: number, ms: number) => Math.round(bytes / 1e6 / (ms / 1000));
