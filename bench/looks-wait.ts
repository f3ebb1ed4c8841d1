import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readlinkSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { nativeSpawner } from '../src/runner/native.js';
import { loadAvg } from './lib/proc.js';
import { quantile, round, sleep } from './lib/stats.js';

/**
 * How long the input watcher's looks wait for the addon's idle-priority thread (native/spawn.c,
 * "The looks run ...") while every core runs a shell loop at normal priority, against the libuv
 * pool. Not part of `npm run bench` (it burns every core): `node dist/bench/looks-wait.js [looks]`.
 * The burners run twice: in sessions of their own, as a session's processes do (with the
 * kernel's autogroups the CPU is shared between sessions first), then in this process's own
 * session, the worst case (the daemon's own group busy). The addon is called directly, without
 * the late path of src/interrupt/kernel.ts (LOOK_LATE_MS), so the thread's own wait shows.
 */
async function main(): Promise<void> {
  const addon = nativeSpawner();
  if (addon instanceof Error || !addon.stdinReaders || !addon.stdinReadersLate) throw new Error('the addon with stdinReaders and stdinReadersLate is needed: npm run build');
  const stdinReaders = addon.stdinReaders.bind(addon);
  const toPool = addon.stdinReadersLate.bind(addon);
  const perBatch = Number(process.argv[2] ?? 1);
  const reader = spawn('/bin/bash', ['--norc', '-c', 'read x'], { detached: true, stdio: ['pipe', 'ignore', 'ignore'] });
  await sleep(300);
  const looks: [number, string, boolean][] = Array.from({ length: perBatch }, () => [reader.pid!, readlinkSync(`/proc/${reader.pid}/fd/0`), false]);
  const measure = async (where: 'thread' | 'pool', n: number) => {
    const waits: number[] = [];
    for (let i = 0; i < n; i++) {
      const from = performance.now();
      const asked = stdinReaders(looks);
      if (where === 'pool') toPool();
      const answer = await asked;
      waits.push(performance.now() - from);
      if (answer[0] !== reader.pid) throw new Error(`wrong answer: ${answer.join(',')}`);
      await sleep(20 + Math.random() * 30);
    }
    return `median ${round(quantile(waits, 0.5), 2)} ms, p90 ${round(quantile(waits, 0.9), 2)}, max ${round(Math.max(...waits), 2)} ms (${n} looks)`;
  };
  const burn = (ownSession: boolean): ChildProcess[] =>
    Array.from({ length: availableParallelism() }, () => spawn('/bin/sh', ['-c', 'while :; do :; done'], { detached: ownSession, stdio: 'ignore' }));
  const cpuSeconds = (p: ChildProcess) => {
    const f = readFileSync(`/proc/${p.pid}/stat`, 'latin1');
    const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  };
  console.log(`looks of ${perBatch} session(s) a batch; load ${loadAvg()}`);
  console.log(`  no burners: the thread ${await measure('thread', 40)}; the pool ${await measure('pool', 40)}`);
  for (const ownSession of [true, false]) {
    const burners = burn(ownSession);
    const from = performance.now();
    try {
      await sleep(500);
      const thread = await measure('thread', 40);
      const pool = await measure('pool', 40);
      const busy = burners.map(cpuSeconds).reduce((a, b) => a + b, 0) / ((performance.now() - from) / 1000);
      console.log(`  ${burners.length} burners ${ownSession ? 'in sessions of their own' : "in this process's session"} (${round(busy, 2)} cores' worth): the thread ${thread}; the pool ${pool}`);
    } finally {
      for (const b of burners) b.kill('SIGKILL');
    }
  }
  process.kill(-reader.pid!, 'SIGKILL');
  console.log(`load ${loadAvg()}`);
}

await main();
