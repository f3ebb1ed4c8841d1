import { readFileSync } from 'node:fs';
import type { BenchOptions } from './lib/options.js';
import type { BenchClient } from './lib/client.js';
import { BenchDaemon } from './lib/daemon.js';
import type { Metric } from './lib/report.js';
import { median, now, quantile, round, sleep } from './lib/stats.js';

/** read(2) on x86-64 and arm64: what /proc/PID/syscall shows while a process blocks in it. */
const READ_NR: Record<string, number> = { x64: 0, arm64: 63 };

interface Case {
  name: string;
  command: string;
  target: number;
  why: string;
}

const CASES: Case[] = [
  { name: 'recognised prompt', command: "printf 'Continue? [y/N] '; read a", target: 300, why: 'a [y/N] prompt: the short quiet period' },
  { name: 'no prompt', command: 'read a', target: 1500, why: 'a bare read with no output: the longest quiet period' },
];

/**
 * Benchmark: how long after a command starts reading its stdin the daemon says it is waiting
 * for input. The bench watches the session's leader in /proc/PID/syscall about every millisecond
 * to timestamp the moment it blocks in read(0, …), and stops the clock when the `waiting_input`
 * event for that session arrives. The headline is an upper bound. Samples run one at a time so
 * they do not share the watcher's ticks.
 */
export async function interruptLatency(opts: BenchOptions): Promise<Metric[]> {
  const readNr = READ_NR[process.arch];
  if (readNr === undefined) throw new Error(`no read(2) syscall number known for ${process.arch}`);
  const samples = opts.quick ? 4 : 10;
  const daemon = await BenchDaemon.start();
  const client = await daemon.client();
  const arrived = new Map<string, number>();
  client.onNotification = (msg) => {
    if (msg.method === 'event' && msg.params?.type === 'waiting_input') arrived.set(msg.params.sessionId, now());
  };
  await client.call('subscribe', { events: ['waiting_input'] });
  opts.log(`interrupts: detection latency from the start of read(0) to the waiting_input event; ${samples} samples per case`);

  const results: { c: Case; upper: number[]; lower: number[] }[] = [];
  try {
    for (const c of CASES) {
      const upper: number[] = [];
      const lower: number[] = [];
      for (let i = 0; i < samples; i++) {
        // A random pause, so samples do not fall into step with the daemon's 50 ms watcher tick.
        await sleep(Math.random() * 100);
        const s = await sample(client, c.command, readNr, arrived);
        upper.push(s.upperMs);
        lower.push(s.lowerMs);
      }
      results.push({ c, upper, lower });
      opts.log(
        `  ${c.name}: p50 ${round(median(upper), 0)} ms (at least ${round(median(lower), 0)} ms), p90 ${round(quantile(upper, 0.9), 0)} ms, ` +
          `max ${round(Math.max(...upper), 0)} ms (${upper.map((x) => Math.round(x)).join(', ')})`,
      );
    }
  } finally {
    client.close();
    await daemon.stop();
  }

  return results.map(({ c, upper, lower }) => ({
    bench: 'interrupts',
    name: `detection latency p50, ${c.name}`,
    value: median(upper),
    unit: 'ms',
    target: { op: '<', value: c.target },
    rounds: upper.map((x) => round(x, 1)),
    detail:
      `\`${c.command}\` on pipes (${c.why}); p90 ${round(quantile(upper, 0.9), 0)} ms, max ${round(Math.max(...upper), 0)} ms; ` +
      `upper bounds (read start taken at the last look that did not see it, or the exec request when the first look already did); lower bounds p50 ${round(median(lower), 0)} ms`,
  }));
}

/**
 * One run: start, bracket the moment the read began between two looks at /proc, wait for the
 * event, answer with end of input. The read may begin before the exec answer is back (a prompt
 * is printed within milliseconds of the spawn); then the bracket starts at the request.
 */
async function sample(client: BenchClient, command: string, readNr: number, arrived: Map<string, number>) {
  const sentAt = now();
  const r = await client.call('exec', { command, background: true });
  if (r.status !== 'running') throw new Error(`exec answered ${JSON.stringify(r).slice(0, 200)}`);
  const { pid, sessionId } = r as { pid: number; sessionId: string };
  let notYet = sentAt;
  let seenAt: number | undefined;
  const deadline = now() + 20_000;
  while (seenAt === undefined) {
    const t = now();
    if (blockedInStdinRead(pid, readNr)) {
      seenAt = t;
      break;
    }
    notYet = t;
    if (t > deadline) throw new Error(`session ${sessionId} never blocked in read(0)`);
    await sleep(1);
  }
  while (!arrived.has(sessionId)) {
    if (now() > deadline) throw new Error(`no waiting_input event for session ${sessionId}`);
    await sleep(1);
  }
  const at = arrived.get(sessionId)!;
  arrived.delete(sessionId);
  await client.call('process', { action: 'resume', sessionId, input: { eof: true } });
  for (;;) {
    const p = await client.call('process', { action: 'poll', sessionId, timeout: 5000 });
    if (p.status === 'completed' || p.status === 'failed') break;
  }
  await client.call('process', { action: 'clear', sessionId });
  return { upperMs: at - notYet, lowerMs: at - seenAt };
}

/** True while the process is blocked in read() on fd 0. */
function blockedInStdinRead(pid: number, readNr: number): boolean {
  try {
    const [nr, fd] = readFileSync(`/proc/${pid}/syscall`, 'latin1').split(' ', 2);
    return Number(nr) === readNr && Number(fd) === 0;
  } catch {
    return false;
  }
}
