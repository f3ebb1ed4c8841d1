import { connect, createServer, type Server } from 'node:net';
import type { BenchOptions } from './lib/options.js';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import type { Metric } from './lib/report.js';
import { median, now, quantile, round, sleep } from './lib/stats.js';
import { freePort } from './lib/net.js';

/**
 * Benchmark: how soon the daemon notices what an agent would otherwise poll for.
 *
 * waitFor port: an exec of `sleep 600` waits for a port the bench itself starts listening on
 * after a random pause (200-700 ms); the time is from the listen to the exec's answer
 * (`ready: true`) arriving here. The baseline is what an agent does without it, run at the same
 * time against the same port: a client that tries to connect every 10 ms.
 *
 * process wait: a `process wait` for a backgrounded `sleep 600` whose process the bench SIGKILLs
 * itself; the time is from the kill to the wait's answer arriving here.
 */
export async function readiness(opts: BenchOptions): Promise<Metric[]> {
  const samples = opts.quick ? 8 : 40;
  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  opts.log(`readiness: waitFor port vs a 10 ms poller, and process wait after a kill; ${samples} samples each`);
  const ours: number[] = [];
  const polled: number[] = [];
  const woke: number[] = [];
  try {
    for (let i = 0; i < samples; i++) {
      const s = await portSample(client);
      ours.push(s.daemonMs);
      polled.push(s.pollerMs);
    }
    for (let i = 0; i < samples; i++) woke.push(await waitSample(client));
  } finally {
    client.close();
    await daemon.stop();
  }
  opts.log(`  waitFor port: p50 ${round(median(ours), 1)} ms, p90 ${round(quantile(ours, 0.9), 1)} ms; 10 ms poller p50 ${round(median(polled), 1)} ms`);
  opts.log(`  process wait after a kill: p50 ${round(median(woke), 2)} ms, p99 ${round(quantile(woke, 0.99), 2)} ms`);
  return [
    {
      bench: 'readiness',
      name: 'waitFor port: noticed after the port opens, p50',
      value: median(ours),
      unit: 'ms',
      target: { op: '<=', value: 50 },
      rounds: ours.map((x) => round(x, 1)),
      detail: `from listen() to the exec answer (ready: true) arriving; p90 ${round(quantile(ours, 0.9), 1)} ms; a client connecting every 10 ms: p50 ${round(median(polled), 1)} ms, p90 ${round(quantile(polled, 0.9), 1)} ms`,
    },
    {
      bench: 'readiness',
      name: 'process wait: answer after the exit, p99',
      value: quantile(woke, 0.99),
      unit: 'ms',
      target: { op: '<=', value: 10 },
      rounds: woke.map((x) => round(x, 2)),
      detail: `from SIGKILL of a backgrounded session's process to the wait's answer arriving; p50 ${round(median(woke), 2)} ms`,
    },
  ];
}


async function portSample(client: BenchClient): Promise<{ daemonMs: number; pollerMs: number }> {
  const port = await freePort();
  const answered = client.call('exec', { command: 'sleep 600', waitFor: { port, host: '127.0.0.1' }, yieldMs: 30_000 }).then((r) => ({ r, at: now() }));
  // The agent's way: try to connect every 10 ms until one succeeds.
  let pollerAt: number | undefined;
  let polling = true;
  const poller = (async () => {
    while (polling && pollerAt === undefined) {
      if (await connects(port)) pollerAt = now();
      else await sleep(10);
    }
  })();
  await sleep(200 + Math.random() * 500);
  const server: Server = createServer((sock) => sock.destroy());
  const openedAt = await new Promise<number>((r) => server.listen(port, '127.0.0.1', () => r(now())));
  const { r, at } = await answered;
  const deadline = now() + 5000;
  while (pollerAt === undefined && now() < deadline) await sleep(1);
  polling = false;
  await poller;
  server.close();
  if (r.status !== 'running' || r.ready !== true) throw new Error(`exec answered ${JSON.stringify(r).slice(0, 300)}`);
  await client.call('process', { action: 'kill', sessionId: r.sessionId, signal: 'SIGKILL', graceMs: 0 });
  await client.call('process', { action: 'clear', sessionId: r.sessionId });
  return { daemonMs: at - openedAt, pollerMs: (pollerAt ?? Infinity) - openedAt };
}

function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ port, host: '127.0.0.1' });
    sock.once('connect', () => {
      sock.destroy();
      resolve(true);
    });
    sock.once('error', () => resolve(false));
  });
}

async function waitSample(client: BenchClient): Promise<number> {
  const r = await client.call('exec', { command: 'exec sleep 600', background: true });
  const waited = client.call('process', { action: 'wait', sessionIds: [r.sessionId], timeout: 30_000 }).then((w) => ({ w, at: now() }));
  // Let the wait reach the daemon and settle before the kill.
  await sleep(20 + Math.random() * 30);
  const killedAt = now();
  process.kill(r.pid, 'SIGKILL');
  const { w, at } = await waited;
  if (!w.done?.includes(r.sessionId)) throw new Error(`wait answered ${JSON.stringify(w).slice(0, 300)}`);
  await client.call('process', { action: 'clear', sessionId: r.sessionId });
  return at - killedAt;
}
