import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { startSleepers } from './lib/sessions.js';
import type { Metric } from './lib/report.js';
import { median, now, round } from './lib/stats.js';

/** Requests in flight while starting the finished sessions. */
const IN_FLIGHT = 8;

/**
 * Benchmark: how long `daemon.diagnostics` holds other clients, with 1,000 sessions held (half
 * running `sleep`s, half finished). A second client polls one session back to back while a
 * diagnostics call is answered; the figure is the longest such poll less the median poll with no
 * diagnostics running: how long a request waited behind the call. Once for the answer as asked
 * by default, once with `objects: true` (the object counts, a full garbage collection per class).
 */
export async function diagnosticsCost(opts: BenchOptions): Promise<Metric[]> {
  const count = opts.quick ? 200 : 1000;
  const calls = opts.quick ? 3 : 8;
  const daemon = await BenchDaemon.start({ PROCCTL_MAX_SESSIONS: String(count * 2) });
  const client = await daemon.client();
  const pinger = await daemon.client();
  const pids = new Set<number>();
  const ids: string[] = [];
  opts.log(`diagnostics: ${count} sessions held; ${calls} calls of daemon.diagnostics each way while another client polls`);
  await startSleepers(client, count / 2, ids, pids);
  let next = 0;
  await Promise.all(
    Array.from({ length: IN_FLIGHT }, async () => {
      while (next < count / 2) {
        next++;
        await client.call('exec', { command: 'echo finished; seq 20' });
      }
    }),
  );
  const poll = (): Promise<number> => pinger.timed('process', { action: 'poll', sessionId: ids[0] }).then((t) => t.receivedMs);
  const quiet: number[] = [];
  for (let i = 0; i < 500; i++) quiet.push(await poll());
  const base = median(quiet);
  await client.call('daemon.diagnostics'); // starts the loop-delay watch
  const out: Metric[] = [];
  for (const [label, params] of [
    ['default', {}],
    ['objects: true', { objects: true }],
  ] as const) {
    const held: number[] = [];
    const control: number[] = [];
    const took: number[] = [];
    for (let c = 0; c < calls; c++) {
      let done = false;
      const polls: number[] = [];
      const polling = (async () => {
        while (!done) polls.push(await poll());
      })();
      const t0 = now();
      await client.call('daemon.diagnostics', params);
      const ms = now() - t0;
      took.push(ms);
      done = true;
      await polling;
      held.push(Math.max(0, Math.max(...polls) - base));
      // The control, in turn: as many polls with no diagnostics call, what the machine alone adds.
      const alone: number[] = [];
      for (let i = 0; i < polls.length; i++) alone.push(await poll());
      control.push(Math.max(0, Math.max(...alone) - base));
    }
    const worst = Math.max(...held);
    opts.log(
      `  ${label}: each call answered in ${round(median(took), 1)} ms (median; max ${round(Math.max(...took), 1)}); a poll beside it waited up to ${round(worst, 1)} ms more than a quiet one (${round(base, 2)} ms); ` +
        `as many polls alone, up to ${round(Math.max(...control), 1)} ms`,
    );
    out.push({
      bench: 'diagnostics',
      name: `daemon.diagnostics ${label}: longest wait of a request beside it`,
      value: round(worst, 1),
      unit: 'ms',
      ...(label === 'default' ? { target: { op: '<=' as const, value: 20 } } : {}),
      rounds: held.map((x) => round(x, 1)),
      detail: `${count} sessions; the call itself ${round(median(took), 1)} ms median, ${round(Math.max(...took), 1)} ms max; a quiet poll ${round(base, 2)} ms; the same polls with no call beside them: up to ${round(Math.max(...control), 1)} ms more`,
    });
  }
  // The sessions go with the daemon (main.ts stops it).
  client.close();
  pinger.close();
  return out;
}
