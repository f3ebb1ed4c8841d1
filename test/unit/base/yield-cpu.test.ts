import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/daemon.js';

const built = join(ROOT, 'build', 'Release', 'procctl.node');
const taskset = ['/usr/bin/taskset', '/bin/taskset'].find((p) => existsSync(p));

// The case yieldCpu is for, on one CPU (taskset): a process writes to a Unix socket whose reader
// (a child blocked reading it) the kernel wakes on the writer's CPU, then goes on with 50 µs of
// its own work. The reader says when it woke. With the yield between the write and that work,
// it has always run by the time the work is done; without (the control), it often waits for it.
const script = `
const { spawn } = require('node:child_process');
const { writeSync } = require('node:fs');
const addon = require(${JSON.stringify(built)});
const child = spawn(process.execPath, ['-e', "const fs = require('node:fs'); const b = Buffer.alloc(1); while (fs.readSync(0, b) === 1) fs.writeSync(1, process.hrtime.bigint() + '\\\\n');"], { stdio: ['pipe', 'pipe', 'inherit'] });
const fd = child.stdin._handle.fd;
let text = '';
const woke = [];
let told;
child.stdout.setEncoding('utf8').on('data', (d) => {
  text += d;
  for (let nl = text.indexOf('\\n'); nl >= 0; nl = text.indexOf('\\n')) {
    woke.push(BigInt(text.slice(0, nl)));
    text = text.slice(nl + 1);
    told?.();
  }
});
const next = () => new Promise((resolve) => (woke.length ? resolve(woke.shift()) : (told = () => { told = undefined; resolve(woke.shift()); })));
const work = () => { const until = performance.now() + 0.05; while (performance.now() < until); };
async function tries(call) {
  let late = 0;
  for (let i = 0; i < 30; i++) {
    await new Promise((resolve) => setTimeout(resolve, 2));
    writeSync(fd, 'x');
    call();
    work();
    const done = process.hrtime.bigint();
    if ((await next()) > done) late++;
  }
  return late;
}
(async () => {
  for (let i = 0; i < 5; i++) { writeSync(fd, 'x'); await next(); }
  const control = await tries(() => addon.nameThread('procctl-test'));
  const yielded = await tries(() => addon.yieldCpu());
  process.stdout.write(JSON.stringify({ control, yielded }));
  child.kill();
})();
`;

describe.skipIf(!existsSync(built) || !taskset)('yieldCpu (native/sched.c)', () => {
  it("lets the reader an answer just woke on this CPU run before the writer's own work goes on", () => {
    const r = spawnSync(taskset!, ['-c', '0', process.execPath, '-e', script], { encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const { control, yielded } = JSON.parse(r.stdout) as { control: number; yielded: number };
    expect(yielded, `the reader woke after the writer's work in ${yielded} of 30 tries with the yield (${control} of 30 without)`).toBe(0);
  });
});
