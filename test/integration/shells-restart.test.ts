import { afterEach, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons } from '../helpers/daemon.js';
import { restartAndWait } from '../helpers/restart.js';
import { killLeftovers } from '../helpers/procs.js';
import { Scoped } from '../helpers/session.js';

/**
 * Shells across a planned restart (SPEC §19, §20): the shell's bash goes on in the new image with
 * its state, idle or running a command whose output and exit code are kept.
 */

const pids = new Set<number>();

afterEach(async () => {
  await stopAllDaemons();
  killLeftovers(pids);
});

/** A counter printing every 10 ms, `n` numbers. */
const counter = (n: number) => `i=0; while [ $i -lt ${n} ]; do echo $i; i=$((i+1)); sleep 0.01; done`;

describe('a shell across a planned restart', () => {
  for (const pty of [false, true]) {
    it(`keeps its bash, its state and a running command's output and exit code${pty ? ', on a terminal' : ''}`, async () => {
      const d = await startDaemon();
      const s = new Scoped(await d.client(), 'sh');
      const eol = pty ? '\r\n' : '\n';
      await s.exec({ command: 'cd /tmp; export KEPT=yes; plain=too', shell: 'r', pty });
      const shellPid = (await s.request('shell.list', {})).result.shells[0].pid;
      pids.add(shellPid);
      // Restarted while idle: the next command sees the state.
      await restartAndWait(d, 0);
      const s2 = new Scoped(await d.client(), 'sh');
      const listed = (await s2.request('shell.list', {})).result.shells;
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({ name: 'r', pid: shellPid, cwd: '/tmp', state: 'idle', commands: 1 });
      const after = await s2.exec({ command: 'echo "$KEPT $plain $PWD"', shell: 'r' });
      expect(after.output).toBe(`yes too /tmp${eol}`);
      expect(after.shell.restarted).toBeUndefined();
      // Restarted while a command runs: every number once, then its own exit code.
      const n = 200;
      const running = await s2.exec({ command: `${counter(n)}; exit_with() { return $1; }; exit_with 5`, shell: 'r', yieldMs: 300 });
      expect(running.status).toBe('running');
      await s2.waitOutput(running.sessionId, `${eol}20${eol}`);
      await restartAndWait(d, 1);
      const s3 = new Scoped(await d.client(), 'sh');
      // The carried command's row still names its shell.
      expect((await s3.list()).find((x: any) => x.sessionId === running.sessionId).shell).toEqual({ name: 'r' });
      const { last } = await s3.pollUntilEnded(running.sessionId, 30_000);
      expect(last.status).toBe('completed');
      expect(last.exitCode).toBe(5);
      const out = (await s3.log(running.sessionId, { offset: 0, limit: 1000 })).output as string;
      // (log drops the last "\n"; on a terminal its "\r" stays.)
      const lines = out.replaceAll('\r\n', '\n').replace(/\r$/, '').split('\n').filter((l) => l !== '');
      expect(lines).toEqual(Array.from({ length: n }, (_, i) => String(i)));
      // And the shell goes on: same process, same state, a command, a kill that keeps it.
      const again = await s3.exec({ command: 'echo "$KEPT"', shell: 'r' });
      expect(again.output).toBe(`yes${eol}`);
      const k = await s3.exec({ command: 'sleep 300', shell: 'r', yieldMs: 200 });
      await s3.process({ action: 'kill', sessionId: k.sessionId });
      const shells = (await s3.request('shell.list', {})).result.shells;
      expect(shells[0]).toMatchObject({ pid: shellPid, state: 'idle' });
      expect(alive(shellPid)).toBe(true);
    });
  }
});
