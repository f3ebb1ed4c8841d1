import { readdirSync } from 'node:fs';
import { clearFinished, type BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import { memoryKb } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import type { BenchOptions } from './lib/options.js';
import { median, now, round } from './lib/stats.js';

const fds = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;

/**
 * Persistent shells (SPEC §20): a command through a shell against an exec of the same command
 * (alternating, one connection), and 1,000 commands through one shell, the shell's and the
 * daemon's memory and descriptors read after the first 100 and after all of them.
 */
export async function shellCost(opts: BenchOptions): Promise<Metric[]> {
  const iterations = opts.quick ? 40 : 200;
  const warmup = opts.quick ? 10 : 30;
  const total = opts.quick ? 300 : 1000;
  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  const compared: Record<string, { ratios: number[]; shell: number[]; exec: number[] }> = {};
  try {
    await run(client, { command: 'true', shell: 'bench' });
    await run(client, { command: 'true', shell: 'benchpty', pty: true });
    // `true` is bash's builtin (no process in the shell); /bin/true is a fork and exec in both; on a terminal, against a terminal exec.
    for (const [command, pty] of [['true', false], ['/bin/true', false], ['/bin/true', true]] as const) {
      const shell = pty ? 'benchpty' : 'bench';
      const label = pty ? `${command}\` on a terminal, \`pty: true` : command;
      const c = (compared[label] = { ratios: [] as number[], shell: [] as number[], exec: [] as number[] });
      for (let r = 0; r < opts.rounds; r++) {
        const s: number[] = [];
        const e: number[] = [];
        for (let i = 0; i < warmup + iterations; i++) {
          // Shell then exec, exec then shell, in turn: load hits both alike.
          const first = i % 2 === 0;
          const a = first ? await run(client, { command, shell, pty }) : await run(client, { command, pty });
          const b = first ? await run(client, { command, pty }) : await run(client, { command, shell, pty });
          if (i < warmup) continue;
          s.push(first ? a : b);
          e.push(first ? b : a);
        }
        await clearFinished(client);
        c.ratios.push(median(s) / median(e));
        c.shell.push(median(s));
        c.exec.push(median(e));
        opts.log(`  ${command}${pty ? ' (terminal)' : ''} round ${r + 1}: shell median ${round(median(s), 3)} ms, exec median ${round(median(e), 3)} ms`);
      }
    }

    // 1,000 commands through one shell: the shell's and the daemon's memory and descriptors stay flat.
    await client.call('shell.close', { name: 'bench' });
    const shellPid = async () => (await client.call('shell.list', {})).shells[0].pid as number;
    const seen: { shellRss: number; shellFds: number; daemonRss: number; daemonFds: number }[] = [];
    for (let i = 1; i <= total; i++) {
      const r = await client.call('exec', { command: `x=$((x+1)); echo "$x"`, shell: 'leak' });
      if (r.output !== `${i}\n`) throw new Error(`command ${i} in the shell answered ${JSON.stringify(r).slice(0, 300)}`);
      if (i % 100 === 0) await clearFinished(client);
      if (i === 100 || i === total) {
        await new Promise((resolve) => setTimeout(resolve, 300));
        const pid = await shellPid();
        seen.push({ shellRss: memoryKb(pid)?.rss ?? 0, shellFds: fds(pid), daemonRss: memoryKb(daemon.pid)?.rss ?? 0, daemonFds: fds(daemon.pid) });
      }
    }
    const [at100, atEnd] = seen;
    opts.log(`  shell: after 100 ${at100.shellRss} kB, ${at100.shellFds} fds; after ${total} ${atEnd.shellRss} kB, ${atEnd.shellFds} fds`);
    opts.log(`  daemon: after 100 ${at100.daemonRss} kB, ${at100.daemonFds} fds; after ${total} ${atEnd.daemonRss} kB, ${atEnd.daemonFds} fds`);
    return [
      ...Object.entries(compared).map(([command, c]) => ({
        bench: 'shells',
        name: `\`${command}\` through a shell / an exec of it, median ratio`,
        value: median(c.ratios),
        unit: 'x',
        target: { op: '<=' as const, value: 1.2 },
        rounds: c.ratios.map((x) => round(x, 3)),
        detail: `shell ${round(median(c.shell), 2)} ms, exec ${round(median(c.exec), 2)} ms`,
      })),
      { bench: 'shells', name: `shell RSS after ${total} commands / after 100`, value: atEnd.shellRss / at100.shellRss, unit: 'x', target: { op: '<=', value: 1.1 }, detail: `${at100.shellRss} kB, ${atEnd.shellRss} kB` },
      { bench: 'shells', name: `shell descriptors after ${total} commands - after 100`, value: atEnd.shellFds - at100.shellFds, unit: '', target: { op: '<=', value: 0 } },
      { bench: 'shells', name: `daemon RSS after ${total} commands / after 100`, value: atEnd.daemonRss / at100.daemonRss, unit: 'x', target: { op: '<=', value: 1.25 }, detail: `${at100.daemonRss} kB, ${atEnd.daemonRss} kB` },
      { bench: 'shells', name: `daemon descriptors after ${total} commands - after 100`, value: atEnd.daemonFds - at100.daemonFds, unit: '', target: { op: '<=', value: 0 } },
    ];
  } finally {
    client.close();
    await daemon.stop();
  }
}

async function run(client: BenchClient, params: Record<string, unknown>): Promise<number> {
  const t0 = now();
  const r = await client.call('exec', params);
  const ms = now() - t0;
  if (r.status !== 'completed' || r.exitCode !== 0) throw new Error(`exec answered ${JSON.stringify(r).slice(0, 300)}`);
  return ms;
}
