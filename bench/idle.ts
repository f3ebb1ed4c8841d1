import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { startSleepers } from './lib/sessions.js';
import { alive, cpuMs, liveProcesses, threadCpuMs } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round, sleep } from './lib/stats.js';


/**
 * Benchmark: what many quiet sessions cost while nobody asks anything. Starts `sleep 600`
 * sessions (stdin open, so the waiting-for-input watcher looks at every one of them), lets them
 * settle, then reads the daemon's CPU time (utime + stime from /proc/PID/stat) over a window
 * with no requests, and times `list` and `poll` with the watcher running. Then the config is
 * reloaded (SIGHUP) with interrupt detection off and the same is measured again; rounds
 * alternate the two. The difference is what detection costs.
 */
export async function idleCost(opts: BenchOptions): Promise<Metric[]> {
  const count = opts.quick ? 200 : 1000;
  const windowMs = opts.quick ? 3000 : 10_000;
  const rounds = opts.quick ? 1 : opts.rounds;
  const listCalls = opts.quick ? 100 : 300;
  const pollCalls = opts.quick ? 300 : 1000;
  const daemon = await BenchDaemon.start({ PROCCTL_MAX_SESSIONS: String(count * 2) });
  const client = await daemon.client();
  opts.log(`idle: ${count} x \`sleep 600\`; ${rounds} rounds of: daemon CPU over ${windowMs / 1000} s with no requests, ${listCalls} list, ${pollCalls} poll; detection on, then off`);
  const ids: string[] = [];
  const pids = new Set<number>();
  type Phase = { idle: number[]; loop: number[]; list: number[]; poll: number[] };
  const on: Phase = { idle: [], loop: [], list: [], poll: [] };
  const off: Phase = { idle: [], loop: [], list: [], poll: [] };
  // The daemon finds its config under XDG_CONFIG_HOME (set by BenchDaemon) and re-reads it on SIGHUP.
  const configDir = join(daemon.env.XDG_CONFIG_HOME!, 'procctl');
  mkdirSync(configDir, { recursive: true });
  const detection = async (enabled: boolean) => {
    writeFileSync(join(configDir, 'config.json'), JSON.stringify({ interrupt: { enabled } }));
    process.kill(daemon.pid, 'SIGHUP');
    // Let the watcher's back-off reach its steady state (it doubles to 1 s per quiet session).
    await sleep(enabled ? 3000 : 1000);
  };
  const measure = async (into: Phase, label: string) => {
    const { idle, loop } = await idleWindow(daemon.pid, windowMs);
    into.idle.push(idle);
    into.loop.push(loop);
    for (let i = 0; i < 20; i++) await client.call('process', { action: 'list' });
    const list: number[] = [];
    for (let i = 0; i < listCalls; i++) {
      const t = await client.timed('process', { action: 'list' });
      if (t.result.sessions.length !== count) throw new Error(`list returned ${t.result.sessions.length} sessions, expected ${count}`);
      list.push(t.receivedMs);
    }
    const poll: number[] = [];
    for (let i = 0; i < pollCalls; i++) {
      const t = await client.timed('process', { action: 'poll', sessionId: ids[(i * 7919) % ids.length] });
      if (t.result.status !== 'running') throw new Error(`poll answered ${JSON.stringify(t.result).slice(0, 200)}`);
      poll.push(t.receivedMs);
    }
    into.list.push(p99(list));
    into.poll.push(p99(poll));
    opts.log(`  detection ${label}: idle ${round(idle, 2)}% of one core (main thread ${round(loop, 2)}%); list p99 ${round(p99(list), 2)} ms, poll p99 ${round(p99(poll), 3)} ms`);
  };
  try {
    await startSleepers(client, count, ids, pids);
    // Alternate, so drift in the machine's speed hits both alike.
    for (let r = 0; r < rounds; r++) {
      await detection(true);
      await measure(on, 'on ');
      await detection(false);
      await measure(off, 'off');
    }
    await client.call('process', { action: 'kill', all: true });
  } finally {
    client.close();
    await daemon.stop();
    const survivors = [...pids].filter(alive).concat(liveProcesses({ pgrps: pids }).map((p) => p.pid));
    for (const pid of new Set(survivors)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone meanwhile
      }
    }
    if (survivors.length) opts.log(`  ! ${survivors.length} session processes outlived the daemon and were killed by pid`);
  }

  const r2 = (xs: number[]) => xs.map((x) => round(x, 2));
  return [
    {
      bench: 'idle',
      name: `daemon idle CPU, ${count} quiet sessions`,
      value: median(on.idle),
      unit: '%',
      target: { op: '<', value: 5 },
      rounds: r2(on.idle),
      detail:
        `utime+stime of procctld over ${windowMs / 1000} s windows with no requests, % of one core (median of ${rounds}; its main thread ${round(median(on.loop), 2)}%); ` +
        `with interrupt detection off ${round(median(off.idle), 2)}% (${r2(off.idle).join('/')}): detection costs ${round(median(on.idle) - median(off.idle), 2)} points`,
    },
    {
      bench: 'idle',
      name: `process list p99 (${count} sessions, detection on)`,
      value: median(on.list),
      unit: 'ms',
      target: { op: '<', value: 5 },
      rounds: r2(on.list),
      detail: `${listCalls} calls per round; with detection off p99 ${round(median(off.list), 2)} ms (${r2(off.list).join('/')})`,
    },
    {
      bench: 'idle',
      name: `process poll p99 (${count} sessions, detection on)`,
      value: median(on.poll),
      unit: 'ms',
      target: { op: '<', value: 1 },
      rounds: on.poll.map((x) => round(x, 3)),
      detail: `${pollCalls} calls per round; with detection off p99 ${round(median(off.poll), 3)} ms (${off.poll.map((x) => round(x, 3)).join('/')})`,
    },
  ];
}

/** Daemon CPU (user + system) over a window, as a percentage of one core: all threads, and the main thread (the event loop). */
async function idleWindow(pid: number, ms: number): Promise<{ idle: number; loop: number }> {
  const cpu0 = cpuMs(pid);
  const loop0 = threadCpuMs(pid);
  const t0 = now();
  await sleep(ms);
  const elapsed = now() - t0;
  return { idle: ((cpuMs(pid) - cpu0) / elapsed) * 100, loop: ((threadCpuMs(pid) - loop0) / elapsed) * 100 };
}

