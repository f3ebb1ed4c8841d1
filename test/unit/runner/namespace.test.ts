import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { SandboxInit } from '../../../src/runner/namespace.js';
import { childrenOf } from '../../../src/runner/procfs.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * A sandbox's init as the end of its session sees it (runner/namespace.ts), played by plain
 * processes: a leader (bwrap's outer process) whose one child is the init, whose child is the job
 * that may be left over. Read through the init's children file held since it was found.
 */
const leaders = new Set<ChildProcess>();

afterEach(() => {
  for (const leader of leaders) {
    try {
      process.kill(-leader.pid!, 'SIGKILL');
    } catch {
      // gone already
    }
  }
  leaders.clear();
});

/** A leader, its init, and the init's one child (a sleep): their pids once all three run. */
async function tree(): Promise<{ leader: number; init: number; job: number }> {
  const leader = spawn('sh', ['-c', 'sh -c "sleep 600 & wait" & wait'], { detached: true, stdio: 'ignore' });
  leaders.add(leader);
  const init = await waitFor(() => childrenOf(leader.pid!)[0], { what: "the leader's child" });
  const job = await waitFor(() => childrenOf(init)[0], { what: "the init's child" });
  return { leader: leader.pid!, init, job };
}

describe('the init of a sandbox, at its leader\'s exit', () => {
  it('is not alone while a process of the job lives, and alone once the last one is gone, read by the descriptor held since it was found', async () => {
    const { leader, init, job } = await tree();
    const whileLeft = new SandboxInit(leader);
    const afterwards = new SandboxInit(leader);
    expect(whileLeft.pid).toBe(init);
    expect(afterwards.pid).toBe(init);
    expect(whileLeft.gone()).toBe(false);
    // The job ends: the init's wait returns and it exits; its held file reads no child.
    process.kill(job, 'SIGKILL');
    await waitFor(() => childrenOf(init).length === 0, { what: "the init's child to go" });
    expect(afterwards.gone()).toBe(true);
  });

  it('is gone once the init itself has exited and been reaped, where another process may hold its pid by then', async () => {
    const { leader, init, job } = await tree();
    const looked = new SandboxInit(leader);
    expect(looked.pid).toBe(init);
    process.kill(job, 'SIGKILL');
    try {
      process.kill(init, 'SIGKILL');
    } catch (err) {
      // Its wait for the job returned first, and it exited by itself: as good.
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
    }
    // The leader's wait reaps its init.
    await waitFor(() => childrenOf(leader).length === 0, { what: 'the init to be reaped' });
    expect(looked.gone()).toBe(true);
  });

  it('is never found when the leader has no child: not gone (the cgroup or group decides)', () => {
    const lone = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
    leaders.add(lone);
    const none = new SandboxInit(lone.pid!);
    expect(none.pid).toBeUndefined();
    expect(none.gone()).toBe(false);
  });
});
