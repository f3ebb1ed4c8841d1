import { expect } from 'vitest';
import type { TestDaemon } from '../helpers/daemon.js';
import type { Scoped } from '../helpers/session.js';
import { within } from '../helpers/session.js';

let n = 0;

/**
 * A client on another connection still gets correct answers: a short exec with a known output,
 * its session in the list, then cleared (so the registry is left as it was).
 */
export async function otherClientWorks(s: Scoped, timeoutMs = 30_000): Promise<void> {
  const tag = `bystander-${process.pid}-${++n}`;
  const r = await within(s.exec({ command: `printf '%s\\n' ${tag}`, yieldMs: timeoutMs }), timeoutMs + 5_000, `exec from the other client (${tag})`);
  expect(r.status).toBe('completed');
  expect(r.output).toBe(`${tag}\n`);
  const listed = await within(s.list(), timeoutMs, 'list from the other client');
  expect(listed.map((x) => x.sessionId)).toContain(r.sessionId);
  const cleared = await s.process({ action: 'clear', sessionId: r.sessionId });
  expect(cleared.sessionId).toBe(r.sessionId);
}

/** Run `otherClientWorks` at least once and then until `stop()` says so; resolves with how many rounds passed. */
export async function keepChecking(s: Scoped, stop: () => boolean): Promise<number> {
  let rounds = 0;
  do {
    await otherClientWorks(s);
    rounds++;
  } while (!stop());
  return rounds;
}

/**
 * Say at once if the daemon under test dies during a file (a crash, the OOM killer), with the
 * end of its stderr: its clients' pending requests would otherwise just wait for the timeout.
 */
export function sayIfDaemonDies(d: TestDaemon): void {
  d.proc.once('exit', (code, signal) => {
    if (code === 0) return;
    console.error(`procctld ${d.proc.pid} exited with ${signal ?? `code ${code}`} during the stress run; its stderr ends:\n${d.stderr().slice(-4000)}`);
  });
}
