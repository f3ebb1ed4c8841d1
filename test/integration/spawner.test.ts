import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';

afterAll(stopAllDaemons);

// Jobs on pipes start through posix_spawn (native/spawn.c); with PROCCTL_SPAWN=node, or where the
// addon is not built, through Node's child_process. Both must give a job the same world.
describe.each([
  { spawner: 'posix_spawn', env: {} },
  { spawner: 'fork', env: { PROCCTL_SPAWN: 'node' } },
])('jobs started through $spawner', ({ spawner, env }) => {
  let d: TestDaemon;
  let c: TestClient;
  beforeAll(async () => {
    d = await startDaemon({ env });
    c = await d.client();
  });
  afterAll(() => c.close());

  it('daemon.status names the way jobs start', async () => {
    expect((await c.call('daemon.status')).spawner).toBe(spawner);
  });

  it('a job leads its own session and group, with no signal ignored or blocked', async () => {
    const r = await c.exec({ command: 'ps -o pid=,pgid=,sid= -p $$; grep -E "^Sig(Ign|Blk)" /proc/$$/status' });
    expect(r.status).toBe('completed');
    const [pid, pgid, sid] = r.output.trim().split('\n')[0].trim().split(/\s+/).map(Number);
    expect(pid).toBeGreaterThan(1);
    expect(pgid).toBe(pid);
    expect(sid).toBe(pid);
    // Node ignores SIGPIPE; a job must not inherit that (`yes | head -1` would never end).
    expect(r.output).toMatch(/SigBlk:\s+0+\n/);
    expect(r.output).toMatch(/SigIgn:\s+0+\n/);
  });

  it('runs in the workdir with the merged environment, stdout and stderr apart', async () => {
    const r = await c.exec({ command: 'pwd; echo "$GREETING" >&2', workdir: '/tmp', env: { GREETING: 'hello there' } });
    expect(r.exitCode).toBe(0);
    const log = await c.process({ action: 'log', sessionId: r.sessionId });
    expect(log.text).toContain('/tmp');
    expect(log.text).toContain('hello there');
  });

  it('stdin "pipe" takes writes and EOF; stdin "null" reads end-of-input at once', async () => {
    const r = await c.exec({ command: 'cat', background: true });
    await c.process({ action: 'write', sessionId: r.sessionId, data: 'line one\n', eof: true });
    let done = await c.process({ action: 'poll', sessionId: r.sessionId, timeout: 20_000 });
    while (done.status === 'running') done = await c.process({ action: 'poll', sessionId: r.sessionId, timeout: 20_000 });
    expect(done.status).toBe('completed');
    expect(done.exitCode).toBe(0);
    const log = await c.process({ action: 'log', sessionId: r.sessionId });
    expect(log.text).toContain('line one');
    const n = await c.exec({ command: 'cat; echo "read ended"', stdin: 'null' });
    expect(n.status).toBe('completed');
    expect(n.output).toContain('read ended');
  });

  it('reports the signal that ended the leader, and never leaves it a zombie', async () => {
    const r = await c.exec({ command: 'echo $$; kill -USR1 $$' });
    expect(r.status).toBe('failed');
    expect(r.signal).toBe('SIGUSR1');
    const pid = Number(r.output.trim());
    await waitFor(() => !alive(pid), { what: `pid ${pid} gone` });
    // kill(pid, 0) succeeds on a zombie: only a reaped child makes it fail.
    await waitFor(() => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    }, { what: `pid ${pid} reaped` });
  });

  it('many short jobs at once all finish, each with its own exit code', async () => {
    const results = await Promise.all(Array.from({ length: 40 }, (_, i) => c.exec({ command: `exit ${i % 7}` })));
    expect(results.map((r) => r.exitCode)).toEqual(Array.from({ length: 40 }, (_, i) => i % 7));
  });
});
