import { describe, expect, it } from 'vitest';
import { sharedDaemon, type Scopes } from '../helpers/session.js';

let scopes: Scopes;

sharedDaemon({ env: { PROCCTL_KILL_GRACE_MS: '1000' } }, (x) => ({ scopes } = x));

describe('exec yieldOnQuietMs (SPEC §20)', () => {
  it('a command that prints, then goes quiet, yields "quiet" long before yieldMs, and runs on', async () => {
    const s = scopes.next('quiet');
    const r = await s.exec({ command: 'echo started; sleep 60', yieldOnQuietMs: 300, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    expect(r.yielded).toBe('quiet');
    expect(r.tail).toBe('started\n');
    expect(r.text).toMatch(/^No output for 300 ms \(yieldOnQuietMs\), so this answer did not wait longer\. Command still running/);
    // Left running, as a yield leaves it.
    const p = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(p.status).toBe('running');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('quiet counts from the start for a command that prints nothing', async () => {
    const s = scopes.next('quiet-none');
    const r = await s.exec({ command: 'sleep 60', yieldOnQuietMs: 200, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    expect(r.yielded).toBe('quiet');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('a command that keeps printing is not quiet: the yield ends the wait ("time")', async () => {
    const s = scopes.next('quiet-busy');
    const r = await s.exec({ command: 'while :; do echo tick; sleep 0.02; done', yieldOnQuietMs: 1500, yieldMs: 3000 });
    scopes.track(r.pid);
    expect(r.status).toBe('running');
    expect(r.yielded).toBe('time');
    expect(r.tail).toContain('tick\n');
    expect(r.text).not.toContain('yieldOnQuietMs');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });

  it('a command that ends before it goes quiet is simply done', async () => {
    const s = scopes.next('quiet-done');
    const r = await s.exec({ command: 'echo one; echo two', yieldOnQuietMs: 5000, yieldMs: 60_000 });
    expect(r.status).toBe('completed');
    expect(r.exitCode).toBe(0);
    expect(r.output).toBe('one\ntwo\n');
    expect(r.yielded).toBeUndefined();
  });

  it('after a quiet yield the session runs on and its output is whole', async () => {
    const s = scopes.next('quiet-whole');
    const r = await s.exec({ command: 'echo first; sleep 1.5; echo second; seq 1 2000', yieldOnQuietMs: 300, yieldMs: 60_000 });
    scopes.track(r.pid);
    expect(r.yielded).toBe('quiet');
    expect(r.tail).toBe('first\n');
    const end = await s.waitEnded(r.sessionId);
    expect(end.status).toBe('completed');
    // log pages by lines: every line, in order, none lost or doubled around the yield.
    const lines = ['first', 'second', ...Array.from({ length: 2000 }, (_, i) => String(i + 1))];
    expect((await s.log(r.sessionId, { offset: 0, limit: 5000 })).output).toBe(lines.join('\n'));
  });

  it('bad values are refused, naming the field and the bounds', async () => {
    const s = scopes.next('quiet-bad');
    expect((await s.error('exec', { command: 'true', yieldOnQuietMs: 5 })).message).toMatch(/yieldOnQuietMs: yieldOnQuietMs is at least 10 ms/);
    expect((await s.error('exec', { command: 'true', yieldOnQuietMs: 200_000 })).message).toMatch(/yieldOnQuietMs is at most 120000 ms/);
    expect((await s.error('exec', { command: 'true', yieldOnQuietMs: 12.5 })).message).toMatch(/whole number of milliseconds/);
    expect((await s.error('exec', { command: 'true', yieldOnQuietMs: 100, background: true })).message).toMatch(/background:true returns at once: pass one of them/);
    expect(await s.list()).toEqual([]);
  });

  it('a plain yield says "time" too', async () => {
    const s = scopes.next('quiet-plain');
    const r = await s.exec({ command: 'sleep 60', yieldMs: 100 });
    scopes.track(r.pid);
    expect(r.yielded).toBe('time');
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});
