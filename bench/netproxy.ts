import { createServer, type Server } from 'node:http';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import type { Metric } from './lib/report.js';
import { median, round } from './lib/stats.js';

const BIG = 256 * 1024 * 1024;

/**
 * Benchmark: what network by name costs a sandboxed job (SPEC §12). Two sandboxed daemons, the
 * same curl inside each: one whose sessions reach the bench's local server through the daemon's
 * proxy (`network: {allow: ["127.0.0.1"]}`), one whose sessions have the host's network
 * (`network: true`) and reach it directly. Time to first byte of a small GET (curl's
 * time_starttransfer, a fresh connection each), and the throughput of a 256 MiB download through
 * CONNECT against the same download direct.
 */
export async function networkCost(opts: BenchOptions): Promise<Metric[]> {
  const gets = opts.quick ? 20 : 100;
  const chunk = Buffer.alloc(1024 * 1024, 97);
  const server: Server = createServer((q, r) => {
    if (q.url !== '/big') return r.end('small answer\n');
    r.writeHead(200, { 'content-length': String(BIG) });
    let sent = 0;
    const more = () => {
      while (sent < BIG) {
        sent += chunk.length;
        if (!r.write(chunk)) return void r.once('drain', more);
      }
      r.end();
    };
    more();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const sandbox = { mode: 'read-only' };
  const proxied = await BenchDaemon.start({}, { sandbox: { ...sandbox, network: { allow: ['127.0.0.1'] } } });
  const direct = await BenchDaemon.start({}, { sandbox: { ...sandbox, network: true } });
  const p = await proxied.client();
  const dc = await direct.client();
  opts.log(`network by name: ${gets} GETs (time to first byte) and ${opts.rounds} downloads of 256 MiB, through the proxy vs direct, curl in a sandbox`);
  const curl = (extra: string, url: string, what: string) => `curl -sS --noproxy "" ${extra} -o /dev/null -w '%{${what}}\\n' ${url}`;
  const times = async (client: typeof p, command: string): Promise<number[]> => {
    const r = await client.call('exec', { command, yieldMs: 120_000, stdin: 'null' });
    if (r.status !== 'completed' || r.exitCode !== 0) throw new Error(`the bench job failed: ${String(r.text).slice(0, 400)}`);
    await client.call('process', { action: 'clear', sessionId: r.sessionId });
    return String(r.output).trim().split('\n').map(Number);
  };
  const small = `http://127.0.0.1:${port}/small`;
  const big = `http://127.0.0.1:${port}/big`;
  const loop = (cmd: string, n: number) => `for i in $(seq ${n}); do ${cmd}; done`;
  const ttfb = { proxy: [] as number[], direct: [] as number[] };
  const speed = { proxy: [] as number[], direct: [] as number[] };
  try {
    for (let r = 0; r < opts.rounds; r++) {
      ttfb.proxy.push(median(await times(p, loop(curl('', small, 'time_starttransfer'), gets))) * 1000);
      ttfb.direct.push(median(await times(dc, loop(curl('', small, 'time_starttransfer'), gets))) * 1000);
      speed.proxy.push((await times(p, curl('-p', big, 'speed_download')))[0] / 1e6);
      speed.direct.push((await times(dc, curl('', big, 'speed_download')))[0] / 1e6);
      opts.log(
        `  round ${r + 1}: first byte ${round(ttfb.proxy.at(-1)!, 2)} ms through the proxy vs ${round(ttfb.direct.at(-1)!, 2)} ms direct; ` +
          `256 MiB at ${round(speed.proxy.at(-1)!, 0)} MB/s through CONNECT vs ${round(speed.direct.at(-1)!, 0)} MB/s direct`,
      );
    }
  } finally {
    p.close();
    dc.close();
    await proxied.stop();
    await direct.stop();
    server.close();
  }
  const ttfbRatio = ttfb.proxy.map((x, i) => x / ttfb.direct[i]);
  const speedRatio = speed.proxy.map((x, i) => x / speed.direct[i]);
  return [
    {
      bench: 'sandbox',
      name: 'network by name: first byte of a GET, proxy / direct',
      value: median(ttfbRatio),
      unit: 'x',
      target: { op: '<=', value: 1.5 },
      rounds: ttfbRatio.map((x) => round(x, 2)),
      detail: `median per round of ${gets} GETs: ${round(median(ttfb.proxy), 2)} ms through the proxy vs ${round(median(ttfb.direct), 2)} ms direct (curl time_starttransfer, a fresh connection each)`,
    },
    {
      bench: 'sandbox',
      name: 'network by name: 256 MiB through CONNECT / direct',
      value: median(speedRatio),
      unit: 'x',
      target: { op: '>=', value: 0.8 },
      rounds: speedRatio.map((x) => round(x, 2)),
      detail: `${round(median(speed.proxy), 0)} MB/s through the proxy's CONNECT vs ${round(median(speed.direct), 0)} MB/s direct (curl speed_download)`,
    },
  ];
}
