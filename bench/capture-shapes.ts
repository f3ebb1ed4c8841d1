import type { BenchOptions } from './lib/options.js';
import { BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import { memoryKb, resetPeakRss } from './lib/proc.js';
import type { Metric } from './lib/report.js';
import { runLikeDaemon } from './lib/shell.js';
import { median, now, round } from './lib/stats.js';

const MiB = 1024 * 1024;

/** What the command prints: the same generator runs for the daemon and for the bare reader. */
type Content = 'zeros' | 'text' | 'lines';
/**
 * background: exec, then polls as the daemon's hint says (poll, wait for the end up to its
 * `retryInMs`, poll again), as a user follows it. tight: polls back to back, each returning at once
 * while output is pending: the most a client can ask of the daemon, reported without a target.
 */
type Mode = 'foreground' | 'background' | 'tight';

interface Shape {
  content: Content;
  mode: Mode;
  /** Commands at once. */
  parallel: number;
}

/** 79 characters and a newline: a line of 80. */
const LINE = 'The quick brown fox jumps over the lazy dog; pack my box with five dozen jugs!!';

function generator(content: Content, bytes: number): string {
  switch (content) {
    case 'zeros':
      return `head -c ${bytes} /dev/zero`;
    case 'text':
      // Letters, no newline anywhere.
      return `tr '\\0' x < /dev/zero | head -c ${bytes}`;
    case 'lines':
      return `yes '${LINE}' | head -c ${bytes}`;
  }
}

interface Pair {
  daemonMs: number;
  bareMs: number;
  /** Daemon RSS: peak during the run (20 ms samples and VmHWM) and once answered, minus just before. */
  peakGrowthMb: number;
}

/**
 * Capture as users run it: each shape a user makes (zeros, text without newlines, text in
 * lines of 80; exec in the foreground waiting for the end, or in the background followed by
 * polls until it ends and a log; one and four at once) against a bare Node reader of the same
 * command, in interleaved pairs of the same round. Foreground time is from the request to the
 * answer; background, from the request to the log read after the last poll saw the end.
 */
export async function captureShapes(opts: BenchOptions): Promise<Metric[]> {
  const bytes = (opts.quick ? 32 : 256) * MiB;
  const rounds = opts.quick ? opts.rounds : Math.max(opts.rounds, 5);
  const shapes: Shape[] = [];
  for (const parallel of [1, 4]) for (const mode of ['foreground', 'background', 'tight'] as const) for (const content of ['zeros', 'text', 'lines'] as const) shapes.push({ content, mode, parallel });
  // CAPTURE_SHAPES=words: only the shapes whose label has every word (e.g. "background,4").
  const only = process.env.CAPTURE_SHAPES?.split(',').filter(Boolean) ?? [];

  const daemon = await BenchDaemon.start();
  const clients: BenchClient[] = [];
  for (let i = 0; i < 4; i++) clients.push(await daemon.client());
  const metrics: Metric[] = [];
  opts.log(`capture-shapes: ${round(bytes / MiB, 0)} MiB per command, ${rounds} rounds per shape`);
  try {
    // Warm-up: every path once, small.
    for (const mode of ['foreground', 'background', 'tight'] as const) await viaDaemon(clients[0], generator('lines', 4 * MiB), mode, 4 * MiB);
    for (const shape of shapes) {
      const label = `${shape.content}, ${shape.mode === 'tight' ? 'background, polls back to back' : shape.mode}, ${shape.parallel === 1 ? 'one' : `${shape.parallel} at once`}`;
      if (!only.every((w) => label.includes(w))) continue;
      const pairs: Pair[] = [];
      const cmd = generator(shape.content, bytes);
      for (let r = 0; r < rounds; r++) {
        const order = r % 2 === 0 ? ['daemon', 'bare'] : ['bare', 'daemon'];
        const pair: Partial<Pair> = {};
        for (const which of order) {
          if (which === 'bare') {
            const t0 = now();
            const runs = await Promise.all(Array.from({ length: shape.parallel }, () => runLikeDaemon(daemon.env, cmd)));
            pair.bareMs = now() - t0;
            for (const run of runs) if (run.bytes !== bytes) throw new Error(`bare reader read ${run.bytes} bytes, expected ${bytes}`);
          } else {
            resetPeakRss(daemon.pid);
            const before = memoryKb(daemon.pid)!.rss;
            let peak = before;
            const sampler = setInterval(() => (peak = Math.max(peak, memoryKb(daemon.pid)?.rss ?? 0)), 20);
            const t0 = now();
            await Promise.all(clients.slice(0, shape.parallel).map((c) => viaDaemon(c, cmd, shape.mode, bytes)));
            pair.daemonMs = now() - t0;
            clearInterval(sampler);
            peak = Math.max(peak, memoryKb(daemon.pid)?.hwm ?? 0);
            pair.peakGrowthMb = (peak - before) / 1024;
          }
        }
        pairs.push(pair as Pair);
      }
      const ratio = pairs.map((p) => p.bareMs / p.daemonMs);
      const total = bytes * shape.parallel;
      const mbps = (ms: number) => round(total / 1e6 / (ms / 1000), 0);
      opts.log(
        `  ${label}: ${ratio.map((x) => round(x, 2)).join(' ')}x; daemon ${mbps(median(pairs.map((p) => p.daemonMs)))} MB/s, ` +
          `bare ${mbps(median(pairs.map((p) => p.bareMs)))} MB/s; RSS growth ${pairs.map((p) => round(p.peakGrowthMb, 1)).join(' ')} MB`,
      );
      metrics.push(
        {
          bench: 'capture-shapes',
          name: `${label}: throughput vs bare reader`,
          value: median(ratio),
          unit: 'x',
          // Back to back, the client asks for every answer it can parse: what that costs is reported, not held to the bare reader.
          ...(shape.mode === 'tight' ? {} : { target: { op: '>=' as const, value: 1.0 } }),
          rounds: ratio.map((v) => round(v, 3)),
          detail: `\`${cmd}\`${shape.parallel > 1 ? ` x${shape.parallel}` : ''}: daemon ${mbps(median(pairs.map((p) => p.daemonMs)))} MB/s vs bare reader ${mbps(median(pairs.map((p) => p.bareMs)))} MB/s, same round`,
        },
        {
          bench: 'capture-shapes',
          name: `${label}: daemon RSS growth (worst round)`,
          value: Math.max(...pairs.map((p) => p.peakGrowthMb)),
          unit: 'MB',
          target: { op: '<', value: 48 },
          rounds: pairs.map((p) => round(p.peakGrowthMb, 1)),
          detail: 'peak VmRSS during the run (VmHWM reset before it, and 20 ms samples) minus VmRSS just before it',
        },
      );
    }
  } finally {
    for (const c of clients) c.close();
    await daemon.stop();
  }
  return metrics;
}

/**
 * One command through the daemon as a user runs it; checks that every byte was seen or counted.
 * Foreground: exec waiting for the end, reading the answer. Background: exec, then a poll, a wait
 * for the end of at most the poll's `retryInMs` (SPEC §6: the hint; `wait` answers at once when
 * the session ends), a poll again, until it ended; then a log of its last lines. Tight: polls back
 * to back until it ended (each returns at once while output is pending), then the log.
 */
async function viaDaemon(c: BenchClient, command: string, mode: Mode, bytes: number): Promise<void> {
  if (mode === 'foreground') {
    const r = await c.call('exec', { command, yieldMs: 120_000 });
    if (r.status !== 'completed' || r.exitCode !== 0) throw new Error(`foreground exec answered ${JSON.stringify(r).slice(0, 300)}`);
    const seen = (r.output as string).length + (r.droppedChars as number);
    if (seen !== bytes) throw new Error(`foreground exec saw ${seen} characters (output + droppedChars), expected ${bytes}`);
    await c.call('process', { action: 'clear', sessionId: r.sessionId });
    return;
  }
  const started = await c.call('exec', { command, background: true });
  const id = started.sessionId as string;
  let seen = 0;
  for (;;) {
    const p = await c.call('process', { action: 'poll', sessionId: id, ...(mode === 'tight' ? { timeout: 60_000 } : {}) });
    seen += (p.output as string).length + (p.droppedChars ? p.droppedChars.stdout + p.droppedChars.stderr : 0);
    if (p.status !== 'running') {
      if (p.status !== 'completed' || p.exitCode !== 0) throw new Error(`background session ended ${JSON.stringify(p).slice(0, 300)}`);
      break;
    }
    if (mode === 'background') await c.call('process', { action: 'wait', sessionIds: [id], timeout: p.retryInMs as number });
  }
  if (seen !== bytes) throw new Error(`polls saw ${seen} characters (output + droppedChars), expected ${bytes}`);
  await c.call('process', { action: 'log', sessionId: id });
  await c.call('process', { action: 'clear', sessionId: id });
}
