import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { closeCgroups, openCgroups, type CgroupLayout } from '../../../src/cgroup/host.js';
import { SessionCgroup } from '../../../src/cgroup/session.js';
import { waitCgroupsEmpty } from '../../../src/runner/cgroup.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * Waiting for a session's cgroup to empty, on this machine's real cgroup2 (root only): the
 * kernel modifies cgroup.events when `populated` changes, and the wait is woken by that rather
 * than looking again and again.
 */

const V2 = process.getuid?.() === 0 && (existsSync('/sys/fs/cgroup/unified/cgroup.procs') || existsSync('/sys/fs/cgroup/cgroup.procs'));

const undo: (() => void)[] = [];
afterEach(() => {
  for (const f of undo.splice(0).reverse()) f();
});

function sessionCgroup(): SessionCgroup {
  const state = mkdtempSync(join(tmpdir(), 'procctl-cgempty-'));
  undo.push(() => rmSync(state, { recursive: true, force: true }));
  const layout: CgroupLayout = openCgroups({ mode: 'v2' }, state);
  undo.push(() => closeCgroups(layout));
  const cg = SessionCgroup.create(layout, `t${process.pid}`, {});
  undo.push(() => cg.remove());
  return cg;
}

describe.skipIf(!V2)('waiting for a session cgroup to empty (v2)', () => {
  it('is woken by the kernel when the last process leaves, not by looking again and again', async () => {
    const cg = sessionCgroup();
    // The job joins the cgroup, then lives a second: long enough for a wait that looks by itself to look many times.
    const job = spawn('/bin/sh', ['-c', 'echo 0 > "$1" && exec sleep 1', 'job', join(cg.v2!, 'cgroup.procs')], { stdio: 'ignore' });
    undo.push(() => job.exitCode === null && job.signalCode === null && job.kill('SIGKILL'));
    await waitFor(() => cg.populated(), { what: 'the job in its cgroup' });

    let looks = 0;
    const populated = cg.populated.bind(cg);
    cg.populated = () => {
      looks++;
      return populated();
    };
    const [still] = await waitCgroupsEmpty([cg], 30_000);
    expect(still).toBe(false);
    // The first look, one once the watch is set, one per change the kernel reports.
    expect(looks).toBeLessThanOrEqual(5);
  });

  it('answers at once for an empty cgroup, and says populated when the time runs out', async () => {
    const cg = sessionCgroup();
    expect(await waitCgroupsEmpty([cg], 10_000)).toEqual([false]);
    const job = spawn('/bin/sh', ['-c', 'echo 0 > "$1" && exec sleep 600', 'job', join(cg.v2!, 'cgroup.procs')], { stdio: 'ignore' });
    const gone = new Promise((r) => job.once('exit', r));
    undo.push(() => job.kill('SIGKILL'));
    await waitFor(() => cg.populated(), { what: 'the job in its cgroup' });
    expect(await waitCgroupsEmpty([cg], 50)).toEqual([true]);
    job.kill('SIGKILL');
    await gone;
    expect(await waitCgroupsEmpty([cg], 10_000)).toEqual([false]);
  });

  it('says populated through cgroup.events held open as it changes, both ways, and lets the descriptor go', async () => {
    const cg = sessionCgroup();
    const held = () => readdirSync('/proc/self/fd').filter((fd) => {
      try {
        return readlinkSync(`/proc/self/fd/${fd}`) === join(cg.v2!, 'cgroup.events');
      } catch {
        return false;
      }
    }).length;
    cg.holdEvents();
    expect(held()).toBe(1);
    // Held twice is held once.
    cg.holdEvents();
    expect(held()).toBe(1);
    expect(cg.populated()).toBe(false);
    const job = spawn('/bin/sh', ['-c', 'echo 0 > "$1" && exec sleep 600', 'job', join(cg.v2!, 'cgroup.procs')], { stdio: 'ignore' });
    const gone = new Promise((r) => job.once('exit', r));
    undo.push(() => job.kill('SIGKILL'));
    // Read again from its start each time: what the kernel says now, not what the first read found.
    await waitFor(() => cg.populated(), { what: 'the job in its cgroup, seen through the held descriptor' });
    job.kill('SIGKILL');
    await gone;
    await waitFor(() => !cg.populated(), { what: 'the cgroup empty, seen through the held descriptor' });
    cg.releaseEvents();
    expect(held()).toBe(0);
    // By its path once let go.
    expect(cg.populated()).toBe(false);
  });
});
