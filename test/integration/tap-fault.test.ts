import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { daemonStatus, restartAndWait } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';
import { logLines, makeStateDir, readRecords, removeStateDirs, sessionsDir } from '../helpers/state.js';

/**
 * A terminal's tap whose splice fails (runner/launch/tap.ts, native/tap.c) is not the end of its
 * output: the daemon says so once in its log, naming the session and the errno, reads what the
 * tap had moved into its pipe, then reads the master directly. PROCCTL_FAULT_TAP makes every
 * tap's splice fail with a chosen errno once so many bytes were moved (on this kernel a master
 * splices). A job printing numbered lines on a terminal past the fault ends normally, and its
 * spool holds every number once, in order.
 */

const pids = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

afterAll(() => removeStateDirs());

/** The whole of a session's spool, oldest segment first. */
function spoolOf(state: string, id: string): string {
  const file = join(sessionsDir(state), `${id}.log`);
  return [`${file}.1`, file].filter((f) => existsSync(f)).map((f) => readFileSync(f, 'utf8')).join('');
}

/** Every number from 0 below `n` once each and in order, then `end`: else which line broke the count. */
function countBreak(output: string, n: number): string | undefined {
  const lines = output.split('\n');
  if (lines.at(-1) !== '') return `the output does not end with a newline: ${JSON.stringify(output.slice(-40))}`;
  lines.pop();
  if (lines.at(-1) !== 'end') return `the last line is ${JSON.stringify(lines.at(-1))}, not "end"`;
  lines.pop();
  if (lines.length !== n) return `${lines.length} numbered lines, not ${n}`;
  for (let i = 0; i < lines.length; i++) if (lines[i] !== String(i)) return `line ${i} is ${JSON.stringify(lines[i])}: a number was lost or doubled`;
  return undefined;
}

describe("a terminal's tap that fails goes on reading its master", () => {
  // EINVAL at the first splice: a kernel without splice from a tty. EPIPE mid-run, with the pipe holding output.
  it.each([
    ['EINVAL', 0],
    ['EPIPE', 40_000],
  ])('splice failing with %s after %i bytes: every numbered line arrives once, the job exits 0, the log names the session and the errno', async (errno, after) => {
    const state = makeStateDir();
    const d = await startDaemon({ env: { PROCCTL_STATE_DIR: state, PROCCTL_FAULT_TAP: `${errno}@${after}`, PROCCTL_INTERRUPT: 'false' } });
    const s = new Scoped(await d.client(), 'tap');
    const n = 30_000;
    // About 170 KB: far past the fault and past what a terminal and a pipe hold, so a job no one reads would block.
    const job = await s.exec({ command: `i=0; while [ $i -lt ${n} ]; do echo $i; i=$((i+1)); done; echo end`, background: true, pty: true });
    pids.add(job.pid);
    const { last } = await s.pollUntilEnded(job.sessionId, 60_000);
    expect(last).toMatchObject({ status: 'completed', exitCode: 0 });
    await waitFor(() => readRecords(state).get(job.sessionId)?.endedAt !== undefined, { what: 'the final record' });
    // A terminal's line discipline ends each line with \r\n.
    const output = spoolOf(state, job.sessionId).replaceAll('\r\n', '\n');
    expect(countBreak(output, n), `${output.length} bytes`).toBeUndefined();
    const said = logLines(d.stdout()).filter((l) => l.sessionId === job.sessionId && l.errno === errno);
    expect(said, d.stdout().slice(-2000)).toHaveLength(1);
    expect(said[0]).toMatchObject({ level: 50 });
    expect(said[0].msg).toContain(`failed with ${errno}`);
  }, 120_000);

  it('a terminal read from its master after its tap failed is carried by a planned restart, tapped again there, and takes input to its end', async () => {
    // Every tap fails once it moved 1,000 bytes: the first image's after the long line, the second image's never (its lines are short).
    const d = await startDaemon({ env: { PROCCTL_FAULT_TAP: 'EPIPE@1000', PROCCTL_INTERRUPT: 'false' } });
    const s = new Scoped(await d.client(), 'tap');
    const shell = await s.exec({ command: 'stty -echo; while read l; do echo "got:$l"; done; exit 3', background: true, pty: true });
    pids.add(shell.pid);
    const long = 'x'.repeat(2000);
    await s.process({ action: 'write', sessionId: shell.sessionId, data: `${long}\n` });
    await s.waitOutput(shell.sessionId, `got:${long}`);
    await s.process({ action: 'write', sessionId: shell.sessionId, data: 'after-the-fault\n' });
    await s.waitOutput(shell.sessionId, 'got:after-the-fault');
    expect(logLines(d.stdout()).filter((l) => l.sessionId === shell.sessionId && l.errno === 'EPIPE')).toHaveLength(1);
    expect((await restartAndWait(d)).sessions).toBe(1);
    expect((await daemonStatus(d)).restarts).toMatchObject({ planned: 1, adopted: 1, lost: 0 });
    const s2 = new Scoped(await d.client(), 'tap');
    await s2.process({ action: 'write', sessionId: shell.sessionId, data: 'carried\n' });
    await s2.waitOutput(shell.sessionId, 'got:carried');
    await s2.process({ action: 'send-keys', sessionId: shell.sessionId, keys: ['C-d'] });
    const ended = await s2.pollUntilEnded(shell.sessionId, 30_000);
    expect(ended.last).toMatchObject({ status: 'completed', exitCode: 3 });
    const all = (await s2.log(shell.sessionId, { offset: 0 })).output as string;
    expect(all.split('\n').filter((l) => l.startsWith('got:')).map((l) => l.trim().slice(0, 20))).toEqual([`got:${long.slice(0, 16)}`, 'got:after-the-fault', 'got:carried']);
  }, 120_000);

  // libuv takes a master's hang-up (every holder of the job's side closed it) after a short read
  // for the end of its output, while the kernel may still hold what the job wrote last: a stream
  // that ended there lost it (runner/launch/tap.ts readToMasterEnd). Many jobs that print a burst
  // and exit at once meet that moment; each spool must end with the job's last line.
  it.each([
    ['its tap failed at once (EINVAL)', 'EINVAL@0'],
    ['node-pty reads it (no tap: the probe says EINVAL)', 'probe:EINVAL'],
  ])('a terminal read from its master (%s) keeps the output a job printed just before it exited', async (_, fault) => {
    const state = makeStateDir();
    const d = await startDaemon({ env: { PROCCTL_STATE_DIR: state, PROCCTL_FAULT_TAP: fault, PROCCTL_INTERRUPT: 'false' } });
    const s = new Scoped(await d.client(), 'tap');
    const n = 20_000;
    const jobs = await Promise.all(Array.from({ length: 12 }, () => s.exec({ command: `seq 0 ${n - 1}; echo end`, background: true, pty: true })));
    for (const job of jobs) pids.add(job.pid);
    for (const job of jobs) expect((await s.pollUntilEnded(job.sessionId, 60_000)).last).toMatchObject({ status: 'completed', exitCode: 0 });
    for (const job of jobs) {
      await waitFor(() => readRecords(state).get(job.sessionId)?.endedAt !== undefined, { what: 'the final record' });
      const output = spoolOf(state, job.sessionId).replaceAll('\r\n', '\n');
      expect(countBreak(output, n), `${job.sessionId}: ${output.length} bytes`).toBeUndefined();
    }
  }, 120_000);

  it('a kernel whose terminal masters do not splice (the probe says EINVAL): no terminal is tapped, node-pty reads them, and the log says so once', async () => {
    const d = await startDaemon({ env: { PROCCTL_FAULT_TAP: 'probe:EINVAL', PROCCTL_INTERRUPT: 'false' } });
    const s = new Scoped(await d.client(), 'tap');
    for (const word of ['first', 'second']) {
      const job = await s.exec({ command: `echo ${word}-terminal`, pty: true, yieldMs: 20_000 });
      pids.add(job.pid);
      expect(job).toMatchObject({ status: 'completed', exitCode: 0 });
      expect(job.output).toContain(`${word}-terminal`);
    }
    const said = logLines(d.stdout()).filter((l) => String(l.msg).includes('does not splice'));
    expect(said, d.stdout().slice(-2000)).toHaveLength(1);
    expect(said[0]).toMatchObject({ level: 40, errno: 'EINVAL' });
    // Nothing tried a tap: no tap failed, and no tap could not be made.
    expect(logLines(d.stdout()).filter((l) => String(l.msg).includes("tap failed") || String(l.msg).includes('cannot go through a tap'))).toEqual([]);
  }, 60_000);

  it('PROCCTL_FAULT_TAP that names no errno: the tap is not made, node-pty reads the terminal, and the log says why with the session', async () => {
    const d = await startDaemon({ env: { PROCCTL_FAULT_TAP: 'sometimes', PROCCTL_INTERRUPT: 'false' } });
    const s = new Scoped(await d.client(), 'tap');
    const job = await s.exec({ command: 'echo hello-there', pty: true, yieldMs: 20_000 });
    pids.add(job.pid);
    expect(job).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(job.output).toContain('hello-there');
    const said = logLines(d.stdout()).filter((l) => l.sessionId === job.sessionId && String(l.msg).includes('tap'));
    expect(said, d.stdout().slice(-2000)).toHaveLength(1);
    expect(said[0]).toMatchObject({ level: 40 });
    expect(said[0].msg).toContain('PROCCTL_FAULT_TAP=sometimes: expected');
  }, 60_000);
});
