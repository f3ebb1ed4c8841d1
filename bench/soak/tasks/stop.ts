import { BenchClient } from '../../lib/client.js';
import { sleep } from '../../lib/stats.js';
import { call, exec, forget, isLive, pollToEnd, pollUntil, proc, type Agent } from '../agent.js';
import { check, expectError, same, SoakTimeout } from '../record.js';

/** A sleeper stopped with one of the usual signals. */
export async function kill(a: Agent): Promise<void> {
  const r = await exec(a, { command: 'sleep 600', background: true, stdin: a.rand.pick(['pipe', 'null']) });
  await sleep(a.rand.int(20, 500));
  const signal = a.rand.pick(['SIGTERM', 'SIGKILL', 'INT', 'hup']);
  const rec = await proc(a, 'kill', { sessionId: r.sessionId, signal });
  same(rec.status, 'failed', 'status after kill');
  same(rec.reason, 'user', 'reason');
  await forget(a, r.sessionId);
}

/** A job that ignores SIGTERM: the grace runs out and SIGKILL ends it. */
export async function killStubborn(a: Agent): Promise<void> {
  const r = await exec(a, { command: `trap '' TERM; echo ready; while :; do sleep 1; done`, background: true });
  await pollUntil(a, r.sessionId, 'ready');
  const rec = await proc(a, 'kill', { sessionId: r.sessionId, graceMs: 200 });
  same(rec.status, 'failed', 'status after kill');
  same(rec.reason, 'user', 'reason');
  same(rec.stop?.graceful, false, 'stop.graceful');
  await forget(a, r.sessionId);
}

/** A command past its timeout, waited for in the foreground or told by the exited event. */
export async function timeout(a: Agent): Promise<void> {
  if (a.rand.chance(0.5)) {
    const r = await exec(a, { command: 'sleep 30', timeout: 1 });
    same(r.status, 'failed', 'status');
    same(r.reason, 'timeout', 'reason');
    check(r.durationMs >= 900, `timed out after ${r.durationMs} ms, before its 1 s timeout`);
    await forget(a, r.sessionId);
    return;
  }
  const r = await exec(a, { command: 'echo started; sleep 30', timeout: 1, background: true });
  const ev = await a.events.next('exited', r.sessionId, 15_000);
  same(ev.status, 'failed', 'exited event status');
  same(ev.reason, 'timeout', 'exited event reason');
  const { output } = await pollToEnd(a, r.sessionId);
  same(output, 'started\n', 'output');
  await forget(a, r.sessionId);
}

/** The agent's thread key: replaced most often, sometimes kept or refused. */
export async function threadKey(a: Agent): Promise<void> {
  const key = `${a.name}-build`;
  const command = `echo build-${++a.n}; sleep 3600`;
  const mode = a.rand.next() < 0.7 ? 'replace' : a.rand.pick(['keep', 'reject']);
  if (mode === 'reject' && a.keyed) {
    const err = await expectError(call(a, 'exec', { command, key, ifRunning: 'reject', background: true, workdir: a.workdir }), 'conflict', 'ifRunning reject');
    same(err.data?.sessionId, a.keyed, 'conflict names the running session');
    return;
  }
  const r = await call(a, 'exec', { command, key, ifRunning: mode, background: true, workdir: a.workdir });
  same(r.status, 'running', 'status');
  const previous = a.keyed;
  a.keyed = r.sessionId;
  if (!previous) return;
  if (mode === 'keep') {
    same(r.sessionId, previous, 'ifRunning keep answers the running session');
    return;
  }
  check(r.sessionId !== previous, 'replace answered the session it replaced');
  const ev = await a.events.next('exited', previous, 15_000);
  same(ev.reason, 'replaced', 'reason of the replaced session');
  a.started.add(previous);
  await forget(a, previous);
}

/** A running session removed: it is stopped, forgotten, and then unknown. */
export async function removeRunning(a: Agent): Promise<void> {
  const r = await exec(a, { command: `echo up; sleep 600`, background: true, pty: a.rand.chance(0.3) });
  await sleep(a.rand.int(50, 400));
  const rec = await proc(a, 'remove', { sessionId: r.sessionId });
  same(rec.status, 'failed', 'status');
  same(rec.reason, 'user', 'reason');
  a.started.delete(r.sessionId);
  a.events.forget(r.sessionId);
  await expectError(proc(a, 'poll', { sessionId: r.sessionId }), 'not_found', 'poll of a removed session');
}

/** A client that goes away during a foreground exec: its session is cancelled. */
export async function cancelByClose(a: Agent): Promise<void> {
  const name = `cancel-${a.name}-${++a.n}`;
  const other = await BenchClient.connect(a.socket);
  const pending = other.call('exec', { command: 'sleep 30', yieldMs: 20_000, name, scope: a.scope, workdir: a.workdir }).catch(() => undefined);
  // Leave once the session runs: a request still unread when its client leaves is never started.
  const find = async () => (await proc(a, 'list', { limit: 30 })).sessions.find((x: any) => x.name === name);
  const seenBy = Date.now() + 10_000;
  while (!(await find())) {
    if (Date.now() > seenBy) throw new SoakTimeout(`session ${name} not listed 10 s after its exec was sent`);
    await sleep(50);
  }
  await sleep(a.rand.int(0, 400));
  other.close();
  await pending;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const s = await find();
    check(s, `session ${name} is no longer in the newest 30 of the scope`);
    a.started.add(s.sessionId);
    if (!isLive(s.status)) {
      same(s.status, 'failed', 'status');
      same(s.reason, 'cancelled', 'reason');
      await forget(a, s.sessionId);
      return;
    }
    if (Date.now() > deadline) throw new SoakTimeout(`session ${name} still ${s.status} 10 s after its client left`);
    await sleep(200);
  }
}

/** Ctrl-C to a job that traps it and exits by itself. */
export async function signalTrap(a: Agent): Promise<void> {
  const r = await exec(a, { command: `trap 'echo got-int; exit 5' INT; echo ready; while :; do sleep 0.2; done`, background: true });
  await pollUntil(a, r.sessionId, 'ready');
  await proc(a, 'signal', { sessionId: r.sessionId, signal: 'INT' });
  const ev = await a.events.next('exited', r.sessionId, 10_000);
  same(ev.status, 'completed', 'status');
  same(ev.exitCode, 5, 'exit code');
  const { output } = await pollToEnd(a, r.sessionId);
  check(output.endsWith('got-int\n'), `output does not end with the trap's line: ${JSON.stringify(output)}`);
  await forget(a, r.sessionId);
}

/** Progress reported for a running job, seen by poll and kept in its final record. */
export async function checkpoint(a: Agent): Promise<void> {
  const r = await exec(a, { command: 'sleep 600', background: true });
  const name = `phase-${++a.n}`;
  await call(a, 'checkpoint', { sessionId: r.sessionId, name, data: { n: a.n } });
  const p = await proc(a, 'poll', { sessionId: r.sessionId });
  same(p.checkpoint?.name, name, 'checkpoint in poll');
  const rec = await proc(a, 'kill', { sessionId: r.sessionId });
  check(rec.checkpoints?.some((c: any) => c.name === name), `final record lacks checkpoint ${name}: ${JSON.stringify(rec.checkpoints)}`);
  await forget(a, r.sessionId);
}

/** Requests that must be refused, each with its kind. */
export async function refusals(a: Agent): Promise<void> {
  await expectError(proc(a, 'poll', { sessionId: 'nosuch00' }), 'not_found', 'poll of an unknown session');
  await expectError(call(a, 'exec', { command: 'true', timout: 5 }), 'invalid', 'exec with a misspelt param');
  const r = await exec(a, { command: 'sleep 600', background: true, stdin: 'null' });
  await expectError(proc(a, 'write', { sessionId: r.sessionId, data: 'x' }), 'conflict', 'write to stdin "null"');
  const err = await expectError(proc(a, 'clear', { sessionId: r.sessionId }), 'not_found', 'clear of a running session');
  same(err.data?.running, true, 'data.running');
  const rec = await proc(a, 'remove', { sessionId: r.sessionId });
  same(rec.reason, 'user', 'reason');
  a.started.delete(r.sessionId);
  a.events.forget(r.sessionId);
}
