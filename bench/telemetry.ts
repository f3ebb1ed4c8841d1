import { createServer, type Server } from 'node:http';
import { createServer as createTcpServer } from 'node:net';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { cpuMs } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { median, now, p99, round } from './lib/stats.js';

/** A receiver that takes every OTLP/HTTP export and answers 200 at once, counting what it got. */
async function sink(): Promise<{ server: Server; port: number; received: () => number }> {
  let received = 0;
  const server = createServer((req, res) => {
    req.resume().on('end', () => {
      received++;
      res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return { server, port: (server.address() as { port: number }).port, received: () => received };
}

/** A port nothing listens on: connections to it are refused, as with a receiver that is down. */
async function closedPort(): Promise<number> {
  const s = createTcpServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', () => resolve()));
  const { port } = s.address() as { port: number };
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

/**
 * The OpenTelemetry export's cost to an exec (SPEC §18, docs/telemetry.md): the round trip of
 * `true` with telemetry off, on with a receiver that takes everything, and on with the receiver
 * down (its port closed). Three daemons side by side, one exec on each in turn, the order
 * rotating; a fresh trio each round. No target: the figures are for reading (docs/telemetry.md).
 */
export async function telemetryCost(opts: BenchOptions): Promise<Metric[]> {
  const iterations = opts.quick ? 60 : 300;
  const warmup = opts.quick ? 10 : 40;
  opts.log(`telemetry: exec \`true\` with OTLP off, on, and on with the receiver down; ${opts.rounds} rounds x ${iterations} iterations (+${warmup} warm-up), rotating`);
  const rounds: { off: number[]; on: number[]; down: number[]; cpu: number[]; received: number; dropped: number }[] = [];
  for (let r = 0; r < opts.rounds; r++) {
    const receiver = await sink();
    const down = await closedPort();
    const otlp = (port: number) => ({ telemetry: { otlp: { endpoint: `http://127.0.0.1:${port}` } } });
    const daemons = await Promise.all([BenchDaemon.start({}, {}), BenchDaemon.start({}, otlp(receiver.port)), BenchDaemon.start({}, otlp(down))]);
    const clients = await Promise.all(daemons.map((d) => d.client()));
    try {
      const exec = async (c: (typeof clients)[number]) => {
        const t0 = now();
        const x = await c.call('exec', { command: 'true' });
        const ms = now() - t0;
        if (x.status !== 'completed' || x.exitCode !== 0) throw new Error(`exec true answered ${JSON.stringify(x).slice(0, 300)}`);
        await c.call('process', { action: 'clear', sessionId: x.sessionId });
        return ms;
      };
      const times: number[][] = [[], [], []];
      let cpu0: number[] = [];
      for (let i = 0; i < warmup + iterations; i++) {
        if (i === warmup) cpu0 = daemons.map((d) => cpuMs(d.pid));
        for (let k = 0; k < 3; k++) {
          const which = (i + k) % 3;
          const ms = await exec(clients[which]);
          if (i >= warmup) times[which].push(ms);
        }
      }
      // The daemon's CPU per exec + clear moves much less with the machine's load than wall time.
      await new Promise((resolve) => setTimeout(resolve, 200));
      const cpu = daemons.map((d, k) => (cpuMs(d.pid) - cpu0[k]) / iterations);
      const st = await clients[2].call('daemon.status');
      const s = { off: times[0], on: times[1], down: times[2], cpu, received: receiver.received(), dropped: st.telemetry.dropped };
      rounds.push(s);
      opts.log(`  round ${r + 1}: median ${round(median(s.on), 3)} ms on, ${round(median(s.down), 3)} ms receiver down, ${round(median(s.off), 3)} ms off (p99 ${round(p99(s.on), 2)}, ${round(p99(s.down), 2)}, ${round(p99(s.off), 2)} ms); daemon CPU per exec + clear ${round(s.cpu[1], 3)} on, ${round(s.cpu[2], 3)} down, ${round(s.cpu[0], 3)} off ms; ${s.received} exports taken by the receiver; ${s.dropped} spans dropped by the one whose receiver is down (an export gives up after 10 s)`);
    } finally {
      for (const c of clients) c.close();
      await Promise.all(daemons.map((d) => d.stop()));
      receiver.server.closeAllConnections();
      receiver.server.close();
    }
  }
  const med = (f: (s: (typeof rounds)[number]) => number) => median(rounds.map(f));
  const ratio = (key: 'on' | 'down') => rounds.map((s) => median(s[key]) / median(s.off));
  return [
    {
      bench: 'telemetry',
      name: 'exec round trip, OTLP on ÷ off',
      value: median(ratio('on')),
      unit: 'x',
      rounds: ratio('on').map((x) => round(x, 3)),
      detail: `median ${round(med((s) => median(s.on)), 3)} vs ${round(med((s) => median(s.off)), 3)} ms; p99 ${round(med((s) => p99(s.on)), 2)} vs ${round(med((s) => p99(s.off)), 2)} ms; a receiver that takes everything, the default intervalMs (10 s)`,
    },
    {
      bench: 'telemetry',
      name: 'exec round trip, OTLP receiver down ÷ off',
      value: median(ratio('down')),
      unit: 'x',
      rounds: ratio('down').map((x) => round(x, 3)),
      detail: `median ${round(med((s) => median(s.down)), 3)} vs ${round(med((s) => median(s.off)), 3)} ms; p99 ${round(med((s) => p99(s.down)), 2)} vs ${round(med((s) => p99(s.off)), 2)} ms; the endpoint's port closed, exports retried and dropped`,
    },
    {
      bench: 'telemetry',
      name: 'daemon CPU per exec + clear, OTLP on ÷ off',
      value: med((s) => s.cpu[1]) / med((s) => s.cpu[0]),
      unit: 'x',
      rounds: rounds.map((s) => round(s.cpu[1] / s.cpu[0], 3)),
      detail: `${round(med((s) => s.cpu[1]), 3)} vs ${round(med((s) => s.cpu[0]), 3)} ms (utime + stime of the daemon process, /proc/<pid>/stat); receiver down: ${round(med((s) => s.cpu[2]), 3)} ms`,
    },
  ];
}
