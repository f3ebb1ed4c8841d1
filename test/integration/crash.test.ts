import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers, leftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';
import { guardianOf, makeStateDir, markedProcesses, printedPids, readRecords, removeStateDirs, sessionsDir, startTimeOf } from '../helpers/state.js';

/** Session processes a test learned of; whatever is left of them is killed by pid afterwards. */
const started = new Set<number>();
/** Processes the test itself started (not sessions). */
const own = new Set<ChildProcess>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(started);
  for (const p of own) if (p.exitCode === null && p.signalCode === null) p.kill('SIGKILL');
  own.clear();
});

afterAll(() => {
  removeStateDirs();
});

const ESCAPING_COMMANDS = {
  // Leaves the session's process group and session at once (setsid without a fork).
  setsid: 'setsid sleep 600 >/dev/null 2>&1 & echo "p=$!"; sleep 600',
  // A double fork into a new session: its parent is gone, it is nobody's child of ours.
  doubleFork: `(setsid sh -c 'echo "p=$$"; exec sleep 600' &) ; sleep 600`,
  plain: 'sleep 600',
  // Ignores the polite signal.
  trapsTerm: `trap '' TERM; echo "p=$$"; sleep 600`,
};

/** The pid of the process whose argv is exactly this, if one runs. */
function findByArgv(argv: string[]): number | undefined {
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'latin1') === `${argv.join('\0')}\0`) return Number(entry);
    } catch {
      // gone
    }
  }
  return undefined;
}

async function waitExit(d: TestDaemon): Promise<void> {
  if (d.proc.exitCode !== null || d.proc.signalCode !== null) return;
  await new Promise((r) => d.proc.once('exit', r));
}

describe('daemon crash', () => {
  it('SIGKILL of the daemon: every process of every session is gone within ~2 s; a new daemon lists them failed/lost', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'crash');

    const sessions: Record<string, any> = {};
    for (const [what, command] of Object.entries(ESCAPING_COMMANDS)) {
      const r = await s1.exec({ command, background: true });
      expect(r.status, what).toBe('running');
      started.add(r.pid);
      sessions[what] = r;
    }
    const ids = Object.values(sessions).map((r) => r.sessionId as string);
    const pids = Object.values(sessions).map((r) => r.pid as number);
    for (const what of ['setsid', 'doubleFork', 'trapsTerm']) {
      const { sessionId } = sessions[what];
      await s1.waitOutput(sessionId, 'p=');
      for (const pid of printedPids((await s1.log(sessionId, { offset: 0 })).output)) {
        pids.push(pid);
        started.add(pid);
      }
    }
    // Every command printed its pid ($$ of the trapping shell is also its session pid).
    expect(pids).toHaveLength(7);
    // The double fork's process runs once its `sh -c` has started.
    await waitFor(() => pids.every((p) => alive(p)), { what: 'every process to run' });
    const marked = markedProcesses(ids);
    for (const { pid } of marked) started.add(pid);
    // The marker scan sees everything the sessions started, in their groups or not.
    expect(marked.map((m) => m.pid).sort()).toEqual(expect.arrayContaining([...new Set(pids)]));
    const guardian = guardianOf(d1.proc.pid!);
    expect(guardian, 'the guardian process').toBeDefined();

    const t0 = Date.now();
    d1.proc.kill('SIGKILL');
    await waitFor(() => leftovers(pids).length === 0 && markedProcesses(ids).length === 0, {
      timeoutMs: 5000,
      everyMs: 10,
      what: 'every session process to be gone after the daemon was SIGKILLed',
    }).catch(() => undefined);
    const took = Date.now() - t0;
    const left = [...new Set([...leftovers(pids), ...markedProcesses(ids).map((p) => p.pid)])];
    console.log(`after SIGKILL of the daemon, every session process was gone in ${took} ms (SPEC: 2 s); left: ${JSON.stringify(left)}`);
    expect(left, 'session processes left after the crash').toEqual([]);
    expect(took).toBeLessThan(5000);
    await waitFor(() => !alive(guardian!), { timeoutMs: 5000, what: 'the guardian to exit' });
    await waitExit(d1);

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'crash');
    const listed = new Map((await s2.list()).map((x: any) => [x.sessionId, x]));
    for (const [what, r] of Object.entries(sessions)) {
      expect(listed.get(r.sessionId), what).toMatchObject({ status: 'failed', reason: 'lost' });
    }
    const p = await s2.process({ action: 'poll', sessionId: sessions.plain.sessionId });
    expect(p.status).toBe('failed');
    expect(p.reason).toBe('lost');
    expect(p.text).toContain('lost');
    // The records on disk say so too, so a third daemon does not have to work it out again.
    const records = readRecords(state);
    for (const id of ids) expect(records.get(id)).toMatchObject({ status: 'failed', reason: 'lost' });
  });

  it('the output a lost session printed before the crash is still readable with log (it is in its spool)', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'lostlog');
    const r = await s1.exec({ command: 'echo printed-before-the-crash; sleep 600', background: true });
    started.add(r.pid);
    await s1.waitOutput(r.sessionId, 'printed-before-the-crash');
    await waitFor(() => readFileSync(join(sessionsDir(state), `${r.sessionId}.log`), 'utf8').includes('printed-before-the-crash'), {
      what: 'the output in the spool',
    });
    d1.proc.kill('SIGKILL');
    await waitExit(d1);
    await waitFor(() => leftovers([r.pid]).length === 0, { timeoutMs: 5000, what: 'the session to be gone' });

    const d2 = await startDaemon({ env });
    const s2 = new Scoped(await d2.client(), 'lostlog');
    const log = await s2.log(r.sessionId);
    expect(log.status).toBe('failed');
    expect(log.output, 'log of a lost session').toContain('printed-before-the-crash');
  });

  it('SIGKILL of the daemon while an exec still waits: the young session is killed by its group, even with no marker left in its environment', async () => {
    const state = makeStateDir();
    const d1 = await startDaemon({ env: { PROCCTL_STATE_DIR: state } });
    const s1 = new Scoped(await d1.client(), 'young');
    // The leader execs into a process with an empty environment: only its process group says whose it is.
    const tag = `6${process.pid}.5`;
    void s1.exec({ command: `exec env -i sleep ${tag}`, yieldMs: 60_000 }).catch(() => undefined);
    let pid: number | undefined;
    await waitFor(() => (pid = findByArgv(['sleep', tag])), { everyMs: 2, what: 'the session to run' });
    started.add(pid!);
    // Killed at once: the session is younger than its first record (100 ms), so the guardian knows
    // the leader only by its group and when it was spawned, not yet by its start time.
    d1.proc.kill('SIGKILL');
    await waitFor(() => !alive(pid!), { timeoutMs: 5000, what: 'the session to be killed by the guardian' }).catch(() => undefined);
    expect(alive(pid!), 'the session of a daemon SIGKILLed while its exec waited').toBe(false);
    await waitExit(d1);
  });

  it('a restart after a crash that nothing cleaned up terminates the survivors, but never a process that reused a recorded pid', async () => {
    const state = makeStateDir();
    const env = { PROCCTL_STATE_DIR: state, PROCCTL_KILL_GRACE_MS: '1000' };
    const d1 = await startDaemon({ env });
    const s1 = new Scoped(await d1.client(), 'survive');
    const survivor = await s1.exec({ command: 'sleep 600', background: true });
    const reused = await s1.exec({ command: 'sleep 600', background: true });
    const escaped = await s1.exec({ command: 'setsid sleep 600 >/dev/null 2>&1 & echo "p=$!"; sleep 600', background: true });
    for (const r of [survivor, reused, escaped]) started.add(r.pid);
    await s1.waitOutput(escaped.sessionId, 'p=');
    const escapedChild = printedPids((await s1.log(escaped.sessionId, { offset: 0 })).output)[0];
    started.add(escapedChild);
    const ids = [survivor.sessionId, reused.sessionId, escaped.sessionId];
    const pids = [survivor.pid, reused.pid, escaped.pid, escapedChild];

    // Nothing cleans up: the guardian first, then the daemon, both by SIGKILL.
    const guardian = guardianOf(d1.proc.pid!);
    expect(guardian, 'the guardian process').toBeDefined();
    process.kill(guardian!, 'SIGKILL');
    await waitFor(() => !alive(guardian!), { what: 'the guardian to die' });
    d1.proc.kill('SIGKILL');
    await waitExit(d1);
    for (const pid of pids) expect(alive(pid), `pid ${pid} survived the crash`).toBe(true);

    // An unrelated process (its own group leader) now holds the pid one record names.
    const decoy = spawn('sleep', ['600'], { detached: true, stdio: 'ignore' });
    own.add(decoy);
    await waitFor(() => startTimeOf(decoy.pid!) !== undefined, { what: 'the decoy to start' });
    const file = join(sessionsDir(state), `${reused.sessionId}.json`);
    const rec = JSON.parse(readFileSync(file, 'utf8'));
    expect(rec.status).toBe('running');
    expect(rec.pid).toBe(reused.pid);
    expect(rec.pidStartTime).toBe(startTimeOf(reused.pid));
    writeFileSync(file, JSON.stringify({ ...rec, pid: decoy.pid, pidStartTime: startTimeOf(decoy.pid!)! + 777 }));

    const t0 = Date.now();
    const d2 = await startDaemon({ env });
    await waitFor(() => leftovers(pids).length === 0 && markedProcesses(ids).length === 0, {
      timeoutMs: 10_000,
      what: 'the survivors to be terminated by the new daemon',
    }).catch(() => undefined);
    const took = Date.now() - t0;
    console.log(`a new daemon terminated the survivors of a crash in ${took} ms (from its start)`);
    expect(leftovers(pids), 'survivors after the restart').toEqual([]);
    expect(markedProcesses(ids)).toEqual([]);
    expect(alive(decoy.pid!), 'a process that reused a recorded pid must not be killed').toBe(true);

    const s2 = new Scoped(await d2.client(), 'survive');
    const listed = new Map((await s2.list()).map((x: any) => [x.sessionId, x]));
    for (const id of ids) expect(listed.get(id), id).toMatchObject({ status: 'failed', reason: 'lost' });
    expect(alive(decoy.pid!)).toBe(true);
  });
});
