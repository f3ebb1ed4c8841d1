import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { childrenOf, killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { cmdline, makeStateDir, readRecords, removeStateDirs, sessionsDir } from '../helpers/state.js';
import { daemonStatus } from '../helpers/restart.js';
import { crashDaemon, keepingState, keptByGuardian, writeReaper } from '../helpers/crash.js';
import { hostScratch } from './sandbox-support.js';

/**
 * No byte lost at the instant of a crash (issue 35, docs/durability.md "Spliced output"): jobs
 * printing numbered lines as fast as bash can, their daemon SIGKILLed again and again while it
 * takes their output, a new daemon started each time. Each job's output, read back from its spool
 * once it ended, holds every number exactly once, in order: what left a pipe was in the spool
 * file at that instant (splice(2)), and what was still in the pipe is read by the next daemon.
 * Terminals the same way: master → a tap pipe the guardian keeps → the spool (runner/launch/tap.ts).
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

/**
 * `count` jobs printing numbered lines as fast as bash can (on terminals with `pty`), their daemon
 * SIGKILLed `crashes` times while it takes their output, a new daemon started each time; `after`
 * runs on the last daemon before the jobs are told to end; `before` starts one more session on the
 * first. Every job's spool, once it ended, holds every number exactly once, in order.
 */
async function printThroughCrashes(opts: { pty: boolean; count: number; crashes: number; after?: (s: Scoped) => Promise<void>; before?: (s: Scoped, state: string) => Promise<void> }): Promise<void> {
  mkdirSync(base, { recursive: true });
  writeReaper(reaper);
  const state = makeStateDir();
  const env = { PROCCTL_STATE_DIR: state, PROCCTL_ON_CRASH: 'keep', PROCCTL_CRASH_GRACE_MS: '60000' };
  const flag = join(base, `stop-${opts.pty ? 'tty' : 'pipe'}`);
  rmSync(flag, { force: true });
  // As fast as bash prints: the daemon is taking output at every instant it can be killed.
  const printer = `i=0; while [ ! -e ${flag} ]; do echo $i; i=$((i+1)); done; echo end`;
  let d: TestDaemon = await startDaemon({ env, launcher: ['python3', reaper] });
  let daemon = (await waitFor(() => childrenOf(d.proc.pid!).find((p) => cmdline(p).includes('procctld')), { what: 'the daemon under the reaper' }))!;
  const s1 = new Scoped(await d.client(), 'splice');
  const jobs: { sessionId: string; pid: number }[] = [];
  for (let i = 0; i < opts.count; i++) jobs.push(await s1.exec({ command: printer, background: true, ...(opts.pty ? { pty: true } : {}) }));
  await opts.before?.(s1, state);
  for (const job of jobs) {
    pids.add(job.pid);
    await waitFor(() => readRecords(state).get(job.sessionId)?.pidStartTime !== undefined, { what: `the first record of ${job.sessionId}, after which the guardian holds it` });
  }
  const crashes = opts.crashes;
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
    expect(st.restarts).toMatchObject({ adopted: jobs.length + (opts.before ? 1 : 0), lost: 0 });
    if (round < crashes - 1) daemon = (await waitFor(() => childrenOf(d.proc.pid!).find((p) => cmdline(p).includes('procctld')), { what: 'the daemon under the reaper' }))!;
  }
  const s = new Scoped(await d.client(), 'splice');
  await opts.after?.(s);
  writeFileSync(flag, '');
  for (const job of jobs) expect((await s.pollUntilEnded(job.sessionId, 60_000)).last).toMatchObject({ status: 'completed', exitCode: 0 });
  await waitFor(() => jobs.every((job) => readRecords(state).get(job.sessionId)?.endedAt !== undefined), { what: 'the final records' });
  for (const job of jobs) {
    // A terminal's line discipline ends each line with \r\n.
    const raw = spoolOf(state, job.sessionId);
    const output = opts.pty ? raw.replaceAll('\r\n', '\n') : raw;
    expect(countBreak(output), `session ${job.sessionId}, ${output.length} bytes`).toBeUndefined();
    expect(output.length).toBeGreaterThan(crashes * 20_000);
  }
}

describe('a crash loses no byte of spliced output (durability.onCrash "keep")', () => {
  it('fast numbered lines of six jobs through four SIGKILLs of their daemon: every number exactly once', async () => {
    await printThroughCrashes({ pty: false, count: 6, crashes: 4 });
  }, 300_000);

  it('fast numbered lines of four terminal jobs through four SIGKILLs (their output goes master -> a tap pipe -> the spool): every number exactly once; a terminal takes input and a resize after the adoptions', async () => {
    let shell: { sessionId: string; pid: number } | undefined;
    await printThroughCrashes({
      pty: true,
      count: 4,
      crashes: 4,
      // Reads lines, says each with the terminal's size; ends with 3 at end of input (^D).
      before: async (s, state) => {
        shell = await s.exec({ command: 'stty -echo; while read l; do echo "got:$l size:$(stty size)"; done; exit 3', background: true, pty: true });
        pids.add(shell.pid);
        await s.process({ action: 'write', sessionId: shell.sessionId, data: 'before\n' });
        await s.waitOutput(shell.sessionId, 'got:before size:30 120');
        await waitFor(() => readRecords(state).get(shell!.sessionId)?.pidStartTime !== undefined, { what: 'the first record of the shell' });
      },
      after: async (s) => {
        await s.process({ action: 'resize', sessionId: shell!.sessionId, cols: 100, rows: 40 });
        await s.process({ action: 'write', sessionId: shell!.sessionId, data: 'after\n' });
        await s.waitOutput(shell!.sessionId, 'got:after size:40 100');
        await s.process({ action: 'send-keys', sessionId: shell!.sessionId, keys: ['C-d'] });
        expect((await s.pollUntilEnded(shell!.sessionId, 20_000)).last.exitCode).toBe(3);
        expect(alive(shell!.pid)).toBe(false);
      },
    });
  }, 300_000);

  it('a terminal kept by a daemon that read it from its master (no tap: PROCCTL_SPLICE=off, as an older build) is tapped by the next: every number once, input and a resize after it, then a second crash keeps it', async () => {
    const { state, env } = keepingState();
    const n = 400;
    // Quiet for 2 s after 49 (the first daemon, reading the master, is killed then: nothing read is unwritten), then on at 10 ms a line.
    const counter = `i=0; while [ $i -lt ${n} ]; do echo $i; [ $i = 49 ] && sleep 2; i=$((i+1)); sleep 0.01; done`;
    const d1 = await startDaemon({ env: { ...env, PROCCTL_SPLICE: 'off' } });
    const s1 = new Scoped(await d1.client(), 'older');
    const count = await s1.exec({ command: counter, background: true, pty: true });
    pids.add(count.pid);
    const shell = await s1.exec({ command: 'stty -echo; while read l; do echo "got:$l size:$(stty size)"; done; exit 3', background: true, pty: true });
    pids.add(shell.pid);
    await keptByGuardian(state, count.sessionId);
    await keptByGuardian(state, shell.sessionId);
    await waitFor(() => spoolOf(state, count.sessionId).endsWith('\n49\r\n'), { what: 'the counter\'s quiet moment, its output so far in the spool' });
    await crashDaemon(d1.proc.pid!, state);

    // Spliced again: the terminal handed back without a tap gets one.
    const d2 = await startDaemon({ env });
    expect((await daemonStatus(d2)).restarts).toMatchObject({ adopted: 2, lost: 0 });
    const s2 = new Scoped(await d2.client(), 'older');
    await s2.process({ action: 'resize', sessionId: shell.sessionId, cols: 100, rows: 40 });
    await s2.process({ action: 'write', sessionId: shell.sessionId, data: 'after\n' });
    await s2.waitOutput(shell.sessionId, 'got:after size:40 100');
    // Killed again while the counter prints (through its tap now), and a third daemon takes it on.
    await waitFor(() => spoolOf(state, count.sessionId).includes('\n150\r\n'), { what: 'the counter to print on through the second daemon' });
    await crashDaemon(d2.proc.pid!, state);
    const d3 = await startDaemon({ env });
    expect((await daemonStatus(d3)).restarts).toMatchObject({ adopted: 2, lost: 0 });
    const s3 = new Scoped(await d3.client(), 'older');
    expect((await s3.pollUntilEnded(count.sessionId, 60_000)).last).toMatchObject({ status: 'completed', exitCode: 0 });
    await waitFor(() => readRecords(state).get(count.sessionId)?.endedAt !== undefined, { what: 'the counter\'s final record' });
    const lines = spoolOf(state, count.sessionId).replaceAll('\r\n', '\n').split('\n').filter((l) => l !== '');
    for (let i = 0; i < Math.max(n, lines.length); i++) expect(lines[i], `line ${i}: a number lost or doubled`).toBe(String(i));
    await s3.process({ action: 'write', sessionId: shell.sessionId, data: 'third\n' });
    await s3.waitOutput(shell.sessionId, 'got:third size:40 100');
    await s3.process({ action: 'send-keys', sessionId: shell.sessionId, keys: ['C-d'] });
    expect((await s3.pollUntilEnded(shell.sessionId, 20_000)).last.exitCode).toBe(3);
  }, 120_000);
});
