import { spawn, spawnSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { findStdinReaders, lookThread } from '../../../src/interrupt/kernel.js';
import { nativeSpawner } from '../../../src/runner/native.js';
import { fileURLToPath } from 'node:url';
import { waitFor } from '../../helpers/daemon.js';
import { killGroups, runInGroup } from '../../helpers/stdin-reader.js';

afterAll(killGroups);
const run = runInGroup;

const READ = process.arch === 'arm64' ? '63 ' : '0 ';
const syscall = (pid: number) => {
  try {
    return readFileSync(`/proc/${pid}/syscall`, 'latin1');
  } catch {
    return '';
  }
};

/** This process's threads named `name`, each with its scheduling policy (field 41 of its stat). */
function threadsNamed(name: string): { tid: number; policy: number }[] {
  const found: { tid: number; policy: number }[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      if (readFileSync(`/proc/self/task/${tid}/comm`, 'latin1').trim() !== name) continue;
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'latin1');
      // The fields after the command's closing parenthesis start at field 3.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      found.push({ tid: Number(tid), policy: Number(fields[41 - 3]) });
    } catch {
      // the thread ended meanwhile
    }
  }
  return found;
}

const SCHED_IDLE = 5;
/** The local build of the addon (the checkout's; the tests run on it). */
const addonFile = () => fileURLToPath(new URL('../../../build/Release/procctl.node', import.meta.url));
const addon = nativeSpawner();
const withAddon = !(addon instanceof Error) && addon.stdinReaders !== undefined;

describe.skipIf(!withAddon)('the looks on a thread of idle priority (native/spawn.c)', () => {
  it('run on one thread named procctl-looks whose policy is SCHED_IDLE, made at the first look', async () => {
    const reader = run('read x');
    await waitFor(() => syscall(reader.pid).startsWith(READ), { what: 'bash blocked in read' });
    expect(await findStdinReaders([{ leader: reader.pid, stdinId: reader.stdinId, pty: false }])).toEqual([{ pid: reader.pid, how: 'read' }]);
    expect(lookThread()).toEqual({ state: 'thread', policy: 'idle' });
    const threads = threadsNamed('procctl-looks');
    expect(threads).toHaveLength(1);
    expect(threads[0].policy).toBe(SCHED_IDLE);
    // A second look uses the same thread; the pool's threads keep their normal policy.
    expect(await findStdinReaders([{ leader: reader.pid, stdinId: reader.stdinId, pty: false }])).toEqual([{ pid: reader.pid, how: 'read' }]);
    expect(threadsNamed('procctl-looks').map((t) => t.tid)).toEqual([threads[0].tid]);
    for (const t of threadsNamed('libuv-worker')) expect(t.policy).toBe(0);
  });

  it('find a reader while every core is busy at normal priority: a late look runs on the pool as well', async () => {
    const reader = run('read x');
    await waitFor(() => syscall(reader.pid).startsWith(READ), { what: 'bash blocked in read' });
    // In this process's own session: with autogroups on, burners in sessions of their own would
    // share the CPU with this process as groups, and the idle thread would meet none of them.
    const burners = Array.from({ length: availableParallelism() }, () => spawn('/bin/sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' }));
    try {
      await waitFor(() => burners.every((b) => syscall(b.pid!).startsWith('running')), { what: 'the burners on the CPU' });
      const queries = Array.from({ length: 100 }, () => ({ leader: reader.pid, stdinId: reader.stdinId, pty: false }));
      for (let i = 0; i < 10; i++) {
        expect(await findStdinReaders(queries)).toEqual(Array(100).fill({ pid: reader.pid, how: 'read' }));
      }
    } finally {
      for (const b of burners) b.kill('SIGKILL');
    }
  }, 60_000);

  it('a look asked for late runs on the pool as well, and the first answer settles it once', async () => {
    if (addon instanceof Error || !addon.stdinReadersLate) throw new Error('the addon has no stdinReadersLate');
    const reader = run('read x');
    await waitFor(() => syscall(reader.pid).startsWith(READ), { what: 'bash blocked in read' });
    expect(addon.stdinReadersLate()).toBe(0);
    for (let i = 0; i < 20; i++) {
      const asked = addon.stdinReaders!([[reader.pid, reader.stdinId, false], [reader.pid, 'pipe:[1]', false]]);
      const late = addon.stdinReadersLate();
      // Taken to the pool, unless the thread answered first (then it was no longer out).
      expect(late === 0 || late === 1).toBe(true);
      expect(await asked).toEqual([reader.pid, 0]);
      expect(addon.stdinReadersLate()).toBe(0);
    }
  });

  it('answers for processes that end during the look, batch after batch', async () => {
    const shortLived = Array.from({ length: 30 }, (_, i) => run(`sleep 0.0${i % 10}; read x`));
    const queries = shortLived.map((p) => ({ leader: p.pid, stdinId: p.stdinId, pty: false }));
    for (let i = 0; i < 20; i++) {
      const answers = await findStdinReaders(queries);
      expect(answers).toHaveLength(queries.length);
      if (i === 10) for (const p of shortLived.slice(0, 15)) process.kill(-p.pid, 'SIGKILL');
    }
    for (const p of shortLived.slice(0, 15)) await waitFor(() => syscall(p.pid) === '', { what: `${p.pid} gone` });
    const answers = await findStdinReaders(queries);
    expect(answers.slice(0, 15)).toEqual(Array(15).fill(undefined));
  });

  it('do not keep a process alive: a script that looked once exits by itself', () => {
    const script = `
      const addon = require(${JSON.stringify(addonFile())});
      addon.stdinReaders([[process.pid, 'pipe:[1]', false]]).then((a) => console.log(JSON.stringify(a), addon.lookThread().state));
    `;
    const r = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(r.error).toBeUndefined();
    expect(r.stdout.trim()).toBe('[0] thread');
    expect(r.status).toBe(0);
  });
});
