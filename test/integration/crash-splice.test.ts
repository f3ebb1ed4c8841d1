import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { childrenOf, killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { cmdline, makeStateDir, readRecords, removeStateDirs, sessionsDir } from '../helpers/state.js';
import { daemonStatus } from '../helpers/restart.js';
import { writeReaper } from '../helpers/crash.js';
import { hostScratch } from './sandbox-support.js';

/**
 * No byte lost at the instant of a crash (issue 35, docs/durability.md "Spliced output"): jobs
 * printing numbered lines as fast as bash can, their daemon SIGKILLed again and again while it
 * takes their output, a new daemon started each time. Each job's output, read back from its spool
 * once it ended, holds every number exactly once, in order: what left a pipe was in the spool
 * file at that instant (splice(2)), and what was still in the pipe is read by the next daemon.
 */

const base = hostScratch('procctl-crash-splice-');
const reaper = join(base, 'reaper.py');
const pids = new Set<number>();


afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

afterAll(() => {
  removeStateDirs();
  rmSync(base, { recursive: true, force: true });
});

/** The whole of a session's spool, oldest segment first. */
function spoolOf(state: string, id: string): string {
  const file = join(sessionsDir(state), `${id}.log`);
  return [`${file}.1`, file].filter((f) => existsSync(f)).map((f) => readFileSync(f, 'utf8')).join('');
}

/** How many bytes a session's spool holds. */
function spoolBytes(state: string, id: string): number {
  const file = join(sessionsDir(state), `${id}.log`);
  return [`${file}.1`, file].reduce((n, f) => n + (existsSync(f) ? statSync(f).size : 0), 0);
}

/** Every number from 0 up, once each and in order, then `end`: else which line broke the count. */
function countBreak(output: string): string | undefined {
  const lines = output.split('\n');
  if (lines.at(-1) !== '') return `the output does not end with a newline: ${JSON.stringify(output.slice(-40))}`;
  lines.pop();
  if (lines.at(-1) !== 'end') return `the last line is ${JSON.stringify(lines.at(-1))}, not "end"`;
  lines.pop();
  for (let i = 0; i < lines.length; i++) if (lines[i] !== String(i)) return `line ${i} is ${JSON.stringify(lines[i])}: a number was lost or doubled`;
  return undefined;
}

describe('a crash loses no byte of spliced output (durability.onCrash "keep")', () => {
  it('fast numbered lines of six jobs through four SIGKILLs of their daemon: every number exactly once', async () => {
    mkdirSync(base, { recursive: true });
    writeReaper(reaper);
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state, PROCCTL_ON_CRASH: 'keep', PROCCTL_CRASH_GRACE_MS: '60000' };
    const flag = join(base, 'stop');
    // As fast as bash prints: the daemon is taking output at every instant it can be killed.
    const printer = `i=0; while [ ! -e ${flag} ]; do echo $i; i=$((i+1)); done; echo end`;
    let d: TestDaemon = await startDaemon({ env, launcher: ['python3', reaper] });
    let daemon = (await waitFor(() => childrenOf(d.proc.pid!).find((p) => cmdline(p).includes('procctld')), { what: 'the daemon under the reaper' }))!;
    const s1 = new Scoped(await d.client(), 'splice');
    const jobs: { sessionId: string; pid: number }[] = [];
    for (let i = 0; i < 6; i++) jobs.push(await s1.exec({ command: printer, background: true }));
    for (const job of jobs) {
      pids.add(job.pid);
      await waitFor(() => readRecords(state).get(job.sessionId)?.pidStartTime !== undefined, { what: `the first record of ${job.sessionId}, after which the guardian holds it` });
    }
    const crashes = 4;
    for (let round = 0; round < crashes; round++) {
      // Killed while it takes output: each job's spool has grown since the daemon served.
      const sizes = jobs.map((job) => spoolBytes(state, job.sessionId));
      await waitFor(() => jobs.every((job, k) => spoolBytes(state, job.sessionId) > sizes[k] + 20_000), { what: 'every job to print on into its spool' });
      process.kill(daemon, 'SIGKILL');
      await waitFor(() => !alive(daemon), { what: `daemon ${daemon} to be gone` });
      await waitFor(() => existsSync(join(state, 'guardian.sock')), { what: 'the guardian to wait for the next daemon' });
      for (const job of jobs) expect(alive(job.pid)).toBe(true);
      // The next one: started by hand here, under no reaper (the jobs' reaper stays the first's).
      d = await startDaemon({ env, ...(round < crashes - 1 ? { launcher: ['python3', reaper] } : {}) });
      const st = (await daemonStatus(d)) as { restarts: { adopted: number; lost: number } };
      expect(st.restarts).toMatchObject({ adopted: jobs.length, lost: 0 });
      if (round < crashes - 1) daemon = (await waitFor(() => childrenOf(d.proc.pid!).find((p) => cmdline(p).includes('procctld')), { what: 'the daemon under the reaper' }))!;
    }
    writeFileSync(flag, '');
    const s = new Scoped(await d.client(), 'splice');
    for (const job of jobs) expect((await s.pollUntilEnded(job.sessionId, 60_000)).last).toMatchObject({ status: 'completed', exitCode: 0 });
    await waitFor(() => jobs.every((job) => readRecords(state).get(job.sessionId)?.endedAt !== undefined), { what: 'the final records' });
    for (const job of jobs) {
      const output = spoolOf(state, job.sessionId);
      expect(countBreak(output), `session ${job.sessionId}, ${output.length} bytes`).toBeUndefined();
      expect(output.length).toBeGreaterThan(crashes * 20_000);
    }
  }, 300_000);
});
