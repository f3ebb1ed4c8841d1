import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startDaemon, stopAllDaemons } from '../helpers/daemon.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-trace-'));

afterAll(async () => {
  await stopAllDaemons();
  rmSync(dir, { recursive: true, force: true });
});

describe('the bench trace (PROCCTL_TRACE_FILE)', () => {
  it("writes, at exit, each request's read, parse and answer times on the monotonic clock, and the other work on the thread", async () => {
    const file = join(dir, 'trace.json');
    const d = await startDaemon({ env: { PROCCTL_TRACE_FILE: file } });
    const c = await d.client();
    const before = Number(process.hrtime.bigint()) / 1e6;
    const started = await c.call('exec', { command: 'sleep 60', background: true });
    for (let i = 0; i < 5; i++) await c.call('process', { action: 'poll', sessionId: started.sessionId });
    const after = Number(process.hrtime.bigint()) / 1e6;
    // Asked for, its samples are read again a second on: poll on past that (the samplers' turns).
    for (const until = Date.now() + 1500; Date.now() < until; ) {
      await c.call('process', { action: 'poll', sessionId: started.sessionId });
      await new Promise((r) => setTimeout(r, 50));
    }
    await c.call('process', { action: 'kill', sessionId: started.sessionId });
    c.close();
    expect(existsSync(file)).toBe(false);
    await d.stop();
    const t = JSON.parse(readFileSync(file, 'utf8')) as { methods: string[]; kinds: string[]; requests: number[][]; spans: number[][] };
    // The five polls, read between this client's first write and its last answer (one clock for both).
    const polls = t.requests.filter((r) => t.methods[r[5]] === 'process' && r[2] >= before && r[2] <= after);
    expect(polls.length).toBe(5);
    expect(t.requests.some((r) => t.methods[r[5]] === 'exec' && r[2] >= before && r[2] <= after)).toBe(true);
    // Each read, then parsed, then answered.
    for (const [, , read, parsed, written] of polls) {
      expect(read).toBeLessThanOrEqual(parsed);
      expect(parsed).toBeLessThanOrEqual(written);
    }
    // A poll holds the session's usage and ports samples: their samplers' turns are named, and so are the watcher's passes.
    const kinds = new Set(t.spans.map((s) => t.kinds[s[0]]));
    expect([...kinds].some((k) => k.startsWith('ports '))).toBe(true);
    expect(kinds.has('watcher tick')).toBe(true);
  });
});

