import type { BenchOptions } from './lib/options.js';
import { clearFinished, execTrue, type BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import type { Metric } from './lib/report.js';
import { median, p99, round } from './lib/stats.js';

/**
 * The cost of sessions as cgroups (SPEC §15): a foreground `exec` of `true` on a daemon that
 * makes a cgroup per session (the host's auto mode) against one with `cgroups.mode: "off"`, and
 * against one that also sets per-session limits (a memory and a process cap, so every exec
 * writes its limits too). Iterations rotate the daemons so load on a shared machine hits them
 * alike. Each session's cgroup is made before its start, joined between fork and exec, read for
 * the final figures and removed at its end: all of that is in the ratio.
 */
export async function cgroupCost(opts: BenchOptions): Promise<Metric[]> {
  const iterations = opts.quick ? 40 : 200;
  const warmup = opts.quick ? 5 : 30;
  const off = await BenchDaemon.start({}, { cgroups: { mode: 'off' } });
  const on = await BenchDaemon.start();
  const daemons = [off, on];
  try {
    const a = await off.client();
    const b = await on.client();
    const status = (await b.call('daemon.status')).cgroups;
    if (status.mode === 'none') throw new Error(`this host gives sessions no cgroups (${status.reason}); the cgroups bench needs them`);
    // Limits only where this host can honour them; otherwise the row says so.
    const limits = { ...(status.controllers.memory ? { memoryBytes: 1 << 30 } : {}), ...(status.controllers.pids ? { processes: 1000 } : {}) };
    const limited = Object.keys(limits).length ? await BenchDaemon.start({}, { limits: { session: limits } }) : undefined;
    if (limited) daemons.push(limited);
    const c = limited ? await limited.client() : undefined;
    opts.log(`cgroups: exec of true with a cgroup per session (${status.mode}: ${status.reason}) vs cgroups off${c ? ` vs with limits ${JSON.stringify(limits)}` : ''}; ${opts.rounds} rounds x ${iterations} (+${warmup} warm-up)`);

    const rounds: { off: number[]; on: number[]; limited: number[] }[] = [];
    for (let r = 0; r < opts.rounds; r++) {
      const s = { off: [] as number[], on: [] as number[], limited: [] as number[] };
      const runs: [keyof typeof s, BenchClient][] = [['off', a], ['on', b], ...(c ? [['limited', c] as [keyof typeof s, BenchClient]] : [])];
      for (let i = 0; i < warmup + iterations; i++) {
        for (let k = 0; k < runs.length; k++) {
          const [name, client] = runs[(i + k) % runs.length];
          const ms = await execTrue(client);
          if (i >= warmup) s[name].push(ms);
        }
      }
      rounds.push(s);
      for (const client of [a, b, c]) if (client) await clearFinished(client);
      opts.log(`  round ${r + 1}: off ${round(median(s.off), 2)} ms, cgroup ${round(median(s.on), 2)} ms${c ? `, cgroup + limits ${round(median(s.limited), 2)} ms` : ''}`);
    }
    // An agent's execs come one at a time with pauses between, not back to back: the kernel's cost
    // of starting a process in a cgroup differs after a pause (an RCU grace period to wait for,
    // docs/resources.md), so the same exec is timed with 30 ms of quiet before each.
    const spaced = { off: [] as number[], on: [] as number[] };
    const spacedCount = opts.quick ? 20 : 60;
    for (let i = 0; i < spacedCount * 2; i++) {
      const [name, client] = i % 2 === 0 ? (['off', a] as const) : (['on', b] as const);
      await new Promise((resolve) => setTimeout(resolve, 30));
      spaced[name].push(await execTrue(client));
    }
    opts.log(`  after 30 ms of quiet each: off ${round(median(spaced.off), 2)} ms, cgroup ${round(median(spaced.on), 2)} ms (${spacedCount} each)`);
    for (const client of [a, b, c]) client?.close();

    const ratio = rounds.map((s) => median(s.on) / median(s.off));
    const metrics: Metric[] = [
      {
        bench: 'cgroups',
        name: 'exec round trip, a cgroup per session / cgroups off',
        value: median(ratio),
        unit: 'x',
        target: { op: '<=', value: 1.15 },
        rounds: ratio.map((x) => round(x, 3)),
        detail:
          `${round(median(rounds.map((s) => median(s.on))), 2)} ms vs ${round(median(rounds.map((s) => median(s.off))), 2)} ms ` +
          `(p99 ${round(median(rounds.map((s) => p99(s.on))), 2)} vs ${round(median(rounds.map((s) => p99(s.off))), 2)} ms); mode ${status.mode}, kill by ${status.kill}`,
      },
    ];
    metrics.push({
      bench: 'cgroups',
      name: 'exec after 30 ms of quiet, a cgroup per session / cgroups off',
      value: median(spaced.on) / median(spaced.off),
      unit: 'x',
      target: { op: '<=', value: 1.15 },
      detail: `${round(median(spaced.on), 2)} ms vs ${round(median(spaced.off), 2)} ms (p99 ${round(p99(spaced.on), 2)} vs ${round(p99(spaced.off), 2)} ms), ${spacedCount} each`,
    });
    if (c) {
      const withLimits = rounds.map((s) => median(s.limited) / median(s.off));
      metrics.push({
        bench: 'cgroups',
        name: 'exec round trip, with per-session limits / cgroups off',
        value: median(withLimits),
        unit: 'x',
        rounds: withLimits.map((x) => round(x, 3)),
        detail: `${round(median(rounds.map((s) => median(s.limited))), 2)} ms; limits.session ${JSON.stringify(limits)} from ${[...new Set(Object.values(status.controllers))].join('/')} controllers`,
      });
    }
    return metrics;
  } finally {
    for (const d of daemons) await d.stop();
  }
}


