import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/daemon.js';

const built = join(ROOT, 'build', 'Release', 'procctl.node');
const tool = (name: string) => [`/usr/bin/${name}`, `/bin/${name}`].find((p) => existsSync(p));
const taskset = tool('taskset');
const chrt = tool('chrt');

// Two threads of one process on one CPU (taskset), both real-time at the same priority (chrt -f),
// where the order is the kernel's rule and not its estimate of fairness: a thread woken does not
// preempt the one running, and sched_yield puts the caller behind it. The main thread wakes a
// worker that counts once per wake-up, then makes a call and reads the count: it moved only if
// the call let the worker run. (Under the daemon's normal policy the same call lets a client woken
// by an answer run first; that is measured in the exec bench, docs/benchmarks.md.)
const script = `
const { Worker } = require('node:worker_threads');
const addon = require(${JSON.stringify(built)});
// 0: the count, 1: go, 2: the worker is ready, 3: a cell to sleep on
const c = new Int32Array(new SharedArrayBuffer(16));
new Worker("const c = new Int32Array(require('node:worker_threads').workerData); Atomics.store(c, 2, 1); for (;;) { Atomics.wait(c, 1, 0); Atomics.store(c, 1, 0); Atomics.add(c, 0, 1); }", { eval: true, workerData: c.buffer });
while (Atomics.load(c, 2) === 0) Atomics.wait(c, 3, 0, 1);
const moved = (call) => {
  let n = 0;
  for (let i = 0; i < 30; i++) {
    Atomics.wait(c, 3, 0, 2);
    const before = Atomics.load(c, 0);
    Atomics.store(c, 1, 1);
    Atomics.notify(c, 1);
    const woken = Atomics.load(c, 0);
    call();
    if (Atomics.load(c, 0) !== woken) n++;
    // The worker counts once the main thread sleeps, if it did not before.
    while (Atomics.load(c, 0) === before) Atomics.wait(c, 3, 0, 1);
  }
  return n;
};
const control = moved(() => addon.nameThread('procctl-test'));
const yielded = moved(() => addon.yieldCpu());
process.stdout.write(JSON.stringify({ control, yielded }));
process.exit(0);
`;

describe.skipIf(!existsSync(built) || !taskset || !chrt)('yieldCpu (native/sched.c)', () => {
  it('lets a thread woken on the same CPU run before the caller goes on; a call that does not yield does not', (ctx) => {
    const r = spawnSync(taskset!, ['-c', '0', chrt!, '-f', '1', process.execPath, '-e', script], { encoding: 'utf8', timeout: 60_000 });
    if (r.status !== 0 && /Operation not permitted/.test(r.stderr)) ctx.skip(`chrt -f needs CAP_SYS_NICE here: ${r.stderr.trim()}`);
    expect(r.status, r.stderr).toBe(0);
    const { control, yielded } = JSON.parse(r.stdout) as { control: number; yielded: number };
    expect(yielded, 'tries where the worker ran across yieldCpu').toBe(30);
    expect(control, 'tries where the worker ran across a call that does not yield').toBe(0);
  });
});
