import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { loadAddon } from '../../src/base/addon.js';
import { crashDaemon, keepingState, keptByGuardian, writeReaper } from '../helpers/crash.js';
import { alive, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { restartAndWait } from '../helpers/restart.js';
import { childrenOf, killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { cmdline, readRecords, removeStateDirs } from '../helpers/state.js';
import { hostScratch, killMarked, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * The exit status of a job a daemon adopted after a crash (docs/durability.md "Exit status"): the
 * new daemon is not its parent and cannot wait for it; whoever the kernel gave it to reaps it at
 * once (systemd does). Here that is a subreaper above the first daemon that reaps every orphan at
 * once, as systemd would: a job's own code still reaches its session, from the pidfd to its leader
 * the guardian kept through the crash (PIDFD_INFO_EXIT, Linux 6.15+), and for a sandboxed job from
 * what bwrap wrote (`--json-status-fd`).
 */

const base = hostScratch('procctl-crash-status-');
const workspace = join(base, 'workspace');
const reaper = join(base, 'reaper.py');
const pids = new Set<number>();
const sessions = new Set<string>();


/**
 * Why this kernel cannot tell a process's status through a pidfd held by a process that is not
 * its parent (undefined when it can): a child of ours, a pidfd opened while it lives, read after
 * it was reaped.
 */
async function noPidfdExit(): Promise<string | undefined> {
  const addon = loadAddon<{ pidfdOpen(pid: number): number; pidfdExit(fd: number): { code: number | null; signal: number | null } | { why: string } }>(['pidfdOpen', 'pidfdExit']);
  if (addon instanceof Error) return addon.message;
  const child = spawn('sleep', ['30'], { stdio: 'ignore' });
  const exited = once(child, 'exit');
  let fd: number;
  try {
    fd = addon.pidfdOpen(child.pid!);
  } catch (err) {
    child.kill('SIGKILL');
    await exited;
    return `pidfd_open fails here: ${(err as Error).message}`;
  }
  child.kill('SIGTERM');
  await exited;
  const told = addon.pidfdExit(fd);
  closeSync(fd);
  if ('why' in told) return told.why;
  return told.signal === 15 ? undefined : `a pidfd told ${JSON.stringify(told)} for a child killed by SIGTERM`;
}
const NO_PIDFD_EXIT = await noPidfdExit();
if (NO_PIDFD_EXIT) process.stderr.write(`skipping the tests of a status told by a kept pidfd: ${NO_PIDFD_EXIT}\n`);

afterEach(async () => {
  await stopAllDaemons();
  killMarked(sessions);
  killLeftovers(pids);
});

afterAll(() => {
  removeStateDirs();
  rmSync(base, { recursive: true, force: true });
});

/**
 * A first daemon on a state directory of its own with onCrash "keep", started under the reaper
 * (which reaps every orphan at once, as systemd does): its env (for the next daemons) and its pid.
 */
async function underReaper(config?: Record<string, unknown>) {
  mkdirSync(base, { recursive: true });
  writeReaper(reaper);
  const { state, env } = keepingState();
  const d1 = await startDaemon({ env, ...(config ? { config } : {}), launcher: ['python3', reaper] });
  const daemon = await waitFor(() => childrenOf(d1.proc.pid!).find((p) => cmdline(p).includes('procctld')), { what: 'the daemon under the reaper' });
  return { state, env, d1, daemon: daemon! };
}

/** A job that printed `started` and whose first record is written: from then the guardian holds its session. */
async function heldByGuardian(s: Scoped, state: string, job: { sessionId: string; pid: number }): Promise<void> {
  sessions.add(job.sessionId);
  pids.add(job.pid);
  await s.waitOutput(job.sessionId, 'started');
  await keptByGuardian(state, job.sessionId);
}

describe.skipIf(SKIP_SANDBOX)('the exit status of a job adopted after a crash', () => {
  it('a sandboxed job reaped by its new parent before the new daemon could see it ends with its own code', async () => {
    const config = { sandbox: { mode: 'workspace-write', workspaces: [base] } };
    const { state, env, d1, daemon } = await underReaper(config);
    mkdirSync(workspace, { recursive: true });
    const s1 = new Scoped(await d1.client(), 'status');
    const job = await s1.exec({ command: 'echo started; read -r x; exit 7', background: true, workdir: workspace });
    await heldByGuardian(s1, state, job);

    await crashDaemon(daemon, state);
    expect(alive(job.pid)).toBe(true);

    const d2 = await startDaemon({ env, config });
    const s2 = new Scoped(await d2.client(), 'status');
    await s2.process({ action: 'write', sessionId: job.sessionId, data: 'go\n' });
    const { last } = await s2.pollUntilEnded(job.sessionId, 30_000);
    // Reaped by the subreaper at once: no zombie was there to read the status from.
    expect(alive(job.pid)).toBe(false);
    expect(last.exitCode).toBe(7);
  }, 120_000);
});

describe.skipIf(NO_PIDFD_EXIT !== undefined)('the exit status of a job that ends while no daemon lives (a kept pidfd)', () => {
  it('jobs on pipes and on a terminal, reaped by their new parent before the next daemon starts, end with their own code or signal', async () => {
    const { state, env, d1, daemon } = await underReaper();
    const s1 = new Scoped(await d1.client(), 'status');
    // Each job waits for its flag, made once the daemon is dead, then ends.
    const flag = join(base, 'go');
    const until = `echo started; while [ ! -e ${flag} ]; do sleep 0.05; done`;
    const jobs = {
      pipes: await s1.exec({ command: `${until}; exit 7`, background: true }),
      terminal: await s1.exec({ command: `${until}; exit 7`, background: true, pty: true }),
      signalled: await s1.exec({ command: `${until}; kill -TERM $$`, background: true }),
    };
    for (const job of Object.values(jobs)) await heldByGuardian(s1, state, job);

    await crashDaemon(daemon, state);
    for (const job of Object.values(jobs)) expect(alive(job.pid)).toBe(true);
    writeFileSync(flag, '');
    // Ended and reaped at once by the subreaper, while no daemon lives: no zombie is left to read.
    for (const job of Object.values(jobs)) await waitFor(() => !existsSync(`/proc/${job.pid}`), { what: `job ${job.pid} to end and be reaped` });

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'status');
    const ended = Object.fromEntries(await Promise.all(Object.entries(jobs).map(async ([k, job]) => [k, (await s2.pollUntilEnded(job.sessionId, 30_000)).last] as const)));
    expect(ended.pipes).toMatchObject({ status: 'completed', exitCode: 7, signal: null });
    expect(ended.terminal).toMatchObject({ status: 'completed', exitCode: 7, signal: null });
    expect(ended.signalled).toMatchObject({ status: 'failed', exitCode: null, signal: 'SIGTERM' });
    await waitFor(() => Object.values(jobs).every((job) => readRecords(state).get(job.sessionId)?.endedAt !== undefined), { what: 'the final records' });
    for (const job of Object.values(jobs)) {
      const r = readRecords(state).get(job.sessionId);
      expect(r.adopted).toBe('crash');
      expect(r.exitUnknown).toBeUndefined();
    }
  }, 120_000);

  it('the pidfd goes on with the adopted job: through a planned restart of the daemon that adopted it, and a second crash', async () => {
    const { state, env, d1, daemon } = await underReaper();
    const s1 = new Scoped(await d1.client(), 'twice');
    const flag = (name: string) => join(base, name);
    const waiting = (name: string, code: number) => `echo started; while [ ! -e ${flag(name)} ]; do sleep 0.05; done; exit ${code}`;
    // One ends after a planned restart of the second daemon (its new image is not the job's parent
    // either, and has only the pidfd handed over with the job), the other after a second crash.
    const afterRestart = await s1.exec({ command: waiting('restart', 7), background: true });
    const afterCrash = await s1.exec({ command: waiting('crash', 9), background: true });
    for (const job of [afterRestart, afterCrash]) await heldByGuardian(s1, state, job);
    await crashDaemon(daemon, state);

    const d2 = await startDaemon({ env });
    // Written by the second daemon once it serves, when it also gives its own guardian the sessions.
    for (const job of [afterRestart, afterCrash]) await waitFor(() => readRecords(state).get(job.sessionId)?.adopted === 'crash', { what: 'the adopted record, written with the guardian\'s copy' });
    await restartAndWait(d2);
    writeFileSync(flag('restart'), '');
    const s2 = new Scoped(await d2.client(), 'twice');
    expect((await s2.pollUntilEnded(afterRestart.sessionId, 30_000)).last).toMatchObject({ status: 'completed', exitCode: 7, signal: null });

    await crashDaemon(d2.proc.pid!, state);
    writeFileSync(flag('crash'), '');
    await waitFor(() => !existsSync(`/proc/${afterCrash.pid}`), { what: `job ${afterCrash.pid} to end and be reaped` });
    const d3 = await startDaemon({ env });
    const s3 = new Scoped(await d3.client(), 'twice');
    expect((await s3.pollUntilEnded(afterCrash.sessionId, 30_000)).last).toMatchObject({ status: 'completed', exitCode: 9, signal: null });
  }, 120_000);
});
