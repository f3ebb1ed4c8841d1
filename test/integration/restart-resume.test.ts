import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { restartAndWait } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';
import { killChildren, spawnCli, waitForOutput, type CliChild } from '../cli/run.js';

/**
 * Readers that reconnect through a planned restart (SPEC §19) go on from the last byte or event
 * they had, whatever happened while they were away. The reader is stopped (SIGSTOP) across the
 * restart, so the job prints, and sessions begin and end, while it has no connection, however
 * loaded the machine: then it is let go (SIGCONT), and every line must arrive exactly once.
 */

const pids = new Set<number>();

afterEach(async () => {
  killChildren();
  await stopAllDaemons();
  killLeftovers(pids);
});

/** The events a `procctl events --json` printed, of one session. */
function eventsOf(out: string, id: string): Record<string, any>[] {
  return out
    .split('\n')
    .filter((l) => l !== '')
    .map((l) => JSON.parse(l))
    .filter((e) => e.sessionId === id);
}

const outputOf = (events: Record<string, any>[]) => events.filter((e) => e.type === 'output').map((e) => e.data).join('');
// `cat` waits for input, so `waiting_input` may come any number of times: starts and ends are what count.
const typesOf = (events: Record<string, any>[]) => events.map((e) => e.type).filter((t) => t === 'started' || t === 'exited');

/** A client on the daemon as it serves now (a restart closes every connection). */
const scoped = async (d: TestDaemon) => new Scoped(await d.client(), 'default');

/** Stop `child` (it keeps its connection, reads nothing, and cannot reconnect), restart the daemon, run `meanwhile`, let it go on. */
async function awayThroughRestart(d: TestDaemon, child: CliChild, meanwhile: (s: Scoped) => Promise<void>): Promise<void> {
  process.kill(child.proc.pid!, 'SIGSTOP');
  try {
    await restartAndWait(d);
    const s = await scoped(d);
    try {
      await meanwhile(s);
    } finally {
      s.c.close();
    }
  } finally {
    process.kill(child.proc.pid!, 'SIGCONT');
  }
}

/** `cat`, started in the background: it prints what is written to it, and ends at end-of-input. */
async function cat(s: Scoped): Promise<string> {
  const job = await s.exec({ command: 'cat', background: true });
  pids.add(job.pid);
  return job.sessionId;
}

const say = (s: Scoped, id: string, data: string) => s.process({ action: 'write', sessionId: id, data });
const end = (s: Scoped, id: string) => s.process({ action: 'write', sessionId: id, eof: true });

/**
 * A daemon running `cat`, which printed a line before `procctl <args>` subscribed, and that
 * reader watching: what it shows of `cat` after the restart is what came while it was away.
 */
async function quietWatched(args: string[]): Promise<{ d: TestDaemon; quiet: string; events: CliChild }> {
  const d = await startDaemon();
  const s = await scoped(d);
  const quiet = await cat(s);
  await say(s, quiet, 'before-subscribing\n');
  await s.waitOutput(quiet, 'before-subscribing');
  s.c.close();
  const events = spawnCli(args, { env: { PROCCTL_SOCKET: d.socket } });
  await waitFor(() => events.stderr().includes('watching events'), { what: 'events to watch', timeoutMs: 60_000 });
  return { d, quiet, events };
}

/** `quiet` prints while the reader is away. */
async function printWhileAway(s: Scoped, quiet: string): Promise<void> {
  await say(s, quiet, 'while-away\n');
  await s.waitOutput(quiet, 'while-away');
}

describe('events hands over what happened while it was away', () => {
  it('without -f: a running session that had printed nothing since it subscribed, and a session begun and ended meanwhile', async () => {
    const { d, quiet, events } = await quietWatched(['events', '--json']);
    let born = '';
    await awayThroughRestart(d, events, async (s2) => {
      await printWhileAway(s2, quiet);
      const job = await s2.exec({ command: 'echo born-while-away', timeout: 60 });
      born = job.sessionId;
      expect(job.status).toBe('completed');
      await end(s2, quiet);
      await s2.waitEnded(quiet, 60_000);
    });
    const r = await events.exited;
    expect(r.code, r.stderr).toBe(0);
    // Output from before it subscribed is not its to show; what came while it was away is, once.
    expect(outputOf(eventsOf(r.stdout, quiet))).toBe('while-away\n');
    expect(typesOf(eventsOf(r.stdout, quiet))).toEqual(['exited']);
    expect(outputOf(eventsOf(r.stdout, born))).toBe('born-while-away\n');
    expect(typesOf(eventsOf(r.stdout, born))).toEqual(['started', 'exited']);
    expect(eventsOf(r.stdout, born)[0]).toMatchObject({ type: 'started', command: 'echo born-while-away' });
    expect(eventsOf(r.stdout, born).at(-1)).toMatchObject({ type: 'exited', status: 'completed', exitCode: 0 });
  }, 180_000);

  it('with -f: a session first heard of after the restart, its output before and after it came back, each once', async () => {
    const { d, quiet, events } = await quietWatched(['events', '-f', '--json']);
    await awayThroughRestart(d, events, (s2) => printWhileAway(s2, quiet));
    await waitForOutput(events, 'while-away');
    const s3 = await scoped(d);
    await say(s3, quiet, 'back-again\n');
    await end(s3, quiet);
    await waitFor(() => eventsOf(events.stdout(), quiet).some((e) => e.type === 'exited'), { what: 'the exited event', timeoutMs: 60_000 });
    s3.c.close();
    events.proc.kill('SIGINT');
    const r = await events.exited;
    expect(outputOf(eventsOf(r.stdout, quiet))).toBe('while-away\nback-again\n');
    expect(typesOf(eventsOf(r.stdout, quiet))).toEqual(['exited']);
  }, 180_000);
});

describe('followers of one session go on from the last character they printed', () => {
  it('log -f', async () => {
    const d = await startDaemon();
    const s = await scoped(d);
    const id = await cat(s);
    await say(s, id, 'one\n');
    s.c.close();
    const follow = spawnCli(['log', id, '-f'], { env: { PROCCTL_SOCKET: d.socket } });
    await waitForOutput(follow, 'one\n');
    await awayThroughRestart(d, follow, async (s2) => {
      await say(s2, id, 'two\n');
      await s2.waitOutput(id, 'two');
      await end(s2, id);
      await s2.waitEnded(id, 60_000);
    });
    const r = await follow.exited;
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toBe('one\ntwo\n');
  }, 180_000);

  it('exec in the foreground', async () => {
    const d = await startDaemon();
    const go = join(d.dir, 'go');
    const run = spawnCli(['exec', '--', 'sh', '-c', `echo before; while [ ! -e ${go} ]; do sleep 0.05; done; echo after; exit 3`], { env: { PROCCTL_SOCKET: d.socket } });
    await waitForOutput(run, 'before\n');
    await awayThroughRestart(d, run, async (s2) => {
      const [job] = await s2.list();
      pids.add(job.pid);
      const id = job.sessionId;
      writeFileSync(go, '');
      await s2.waitEnded(id, 60_000);
    });
    const r = await run.exited;
    expect(r.code, r.stderr).toBe(3);
    expect(r.stdout).toBe('before\nafter\n');
  }, 180_000);
});
