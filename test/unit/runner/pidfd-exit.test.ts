import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { closeSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { adoptChild, leaderPidfd, nativeSpawner, type Addon } from '../../../src/runner/native.js';
import { readStat } from '../../../src/runner/procfs.js';

/**
 * A leader this process did not start (a job adopted after a crash): its status told by a pidfd
 * once another process, its parent, reaped it (PIDFD_INFO_EXIT, Linux 6.15+), or why not.
 */
const addon = nativeSpawner() as Addon;
const parents = new Set<ChildProcess>();

/**
 * A job whose parent is another process (a shell in `wait`), which reaps it the moment it ends;
 * goes on `go`. Handed back once the job says its trap is set: a SIGUSR1 before it would end the
 * job by the signal, not as the script says.
 */
async function foreignJob(script: string): Promise<{ pid: number; go: () => Promise<void> }> {
  const parent = spawn('sh', ['-c', 'sh -c "$1" & echo "pid $!"; wait', 'sh', script], { stdio: ['ignore', 'pipe', 'inherit'] });
  parents.add(parent);
  // The parent's "pid N" and the job's "ready", in either order.
  let out = '';
  while (!/pid \d+\n/.test(out) || !out.includes('ready\n')) out += ((await once(parent.stdout!, 'data')) as [Buffer])[0].toString();
  const pid = Number(/pid (\d+)/.exec(out)![1]);
  return {
    pid,
    go: async () => {
      const done = once(parent, 'exit');
      process.kill(pid, 'SIGUSR1');
      await done;
    },
  };
}

/** What the watcher says when the job ends: the arguments of its exit listener. */
function watch(pid: number, fd: number | undefined, through: Addon = addon): Promise<unknown[]> {
  return new Promise((resolve) => adoptChild(through, pid, (...args) => resolve(args), fd));
}

afterEach(() => {
  for (const p of parents) p.kill('SIGKILL');
  parents.clear();
});

// The job waits for SIGUSR1, then ends as told: a trap, so the shell, the leader, is what ends.
const EXIT_7 = 'trap "exit 7" USR1; echo ready; while :; do sleep 0.05; done';
const TERM_ITSELF = 'trap "trap - TERM; kill -TERM \\$\\$" USR1; echo ready; while :; do sleep 0.05; done';

const probe = await (async () => {
  if (!addon.pidfdOpen || !addon.pidfdExit) return 'the addon has no pidfdOpen/pidfdExit: rebuild it (node scripts/build-addon.mjs)';
  const job = await foreignJob(EXIT_7);
  const fd = addon.pidfdOpen(job.pid);
  await job.go();
  const told = addon.pidfdExit(fd);
  closeSync(fd);
  return 'why' in told ? told.why : undefined;
})();
if (probe) process.stderr.write(`skipping the tests of a status told by a pidfd on this kernel: ${probe}\n`);

describe('the exit of a leader that is not our child', () => {
  it.skipIf(probe !== undefined)('is told by its pidfd after its own parent reaped it: a code, or a signal', async () => {
    const coded = await foreignJob(EXIT_7);
    const signalled = await foreignJob(TERM_ITSELF);
    expect(readStat(coded.pid)?.ppid).not.toBe(process.pid);
    const told = [watch(coded.pid, leaderPidfd(coded.pid, readStat(coded.pid)!.startTime)), watch(signalled.pid, leaderPidfd(signalled.pid, readStat(signalled.pid)!.startTime))];
    await coded.go();
    await signalled.go();
    const [a, b] = await Promise.all(told);
    expect(a.slice(0, 2)).toEqual([7, null]);
    expect(a[3]).toBeUndefined();
    expect(b.slice(0, 2)).toEqual([null, 'SIGTERM']);
  }, 30_000);

  it('on a kernel without PIDFD_INFO_EXIT (older than 6.15) ends unknown, saying why', async () => {
    // What the addon answers there, which this kernel cannot show.
    const old: Addon = { ...addon, pidfdExit: () => ({ why: "this kernel cannot tell a process's exit status to a process that is not its parent (PIDFD_INFO_EXIT, Linux 6.15 or later)", running: false }) };
    const job = await foreignJob(EXIT_7);
    const fd = leaderPidfd(job.pid, readStat(job.pid)!.startTime);
    expect(fd).toBeTypeOf('number');
    const told = watch(job.pid, fd, old);
    await job.go();
    const [code, signal, , why] = await told;
    closeSync(fd!);
    expect([code, signal]).toEqual([null, null]);
    expect(why).toMatch(/^its new parent reaped it, and this kernel cannot tell .*Linux 6\.15/);
  }, 30_000);

  it('without a pidfd (kept by an older build) ends unknown, saying no pidfd was kept', async () => {
    const job = await foreignJob(EXIT_7);
    const told = watch(job.pid, undefined);
    await job.go();
    const [code, signal, , why] = await told;
    expect([code, signal]).toEqual([null, null]);
    expect(why).toMatch(/no pidfd to it was kept/);
  }, 30_000);

  it('opens no pidfd for a leader whose start time is not the recorded one (a reused pid)', async () => {
    const job = await foreignJob(EXIT_7);
    expect(leaderPidfd(job.pid, readStat(job.pid)!.startTime + 1)).toBeUndefined();
    expect(leaderPidfd(job.pid, undefined)).toBeUndefined();
    await job.go();
  }, 30_000);
});
