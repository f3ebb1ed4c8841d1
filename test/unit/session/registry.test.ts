import { describe, expect, it } from 'vitest';
import { ProcctlError } from '../../../src/base/errors.js';
import { EventBus } from '../../../src/session/events.js';
import { Registry, expiredSessions, newSessionId } from '../../../src/session/registry.js';
import { makeSession } from './make-session.js';

/** A clock the test moves by hand. */
function fakeClock(start = 1_000_000) {
  let t = start;
  return { now: () => t, advance: (ms: number) => (t += ms), set: (ms: number) => (t = ms) };
}

const session = (id: string, scope: string, now: () => number, events = new EventBus()) => makeSession(id, scope, { stdin: 'pipe', now, events });

function notFoundError(fn: () => unknown): ProcctlError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(ProcctlError);
    expect((err as ProcctlError).kind).toBe('not_found');
    return err as ProcctlError;
  }
  throw new Error('expected not_found, nothing was thrown');
}

describe('newSessionId', () => {
  it('is 8 characters of an alphabet without 0/o/1/l', () => {
    for (let i = 0; i < 200; i++) expect(newSessionId()).toMatch(/^[a-km-np-z2-9]{8}$/);
  });

  it('is different each time', () => {
    const ids = new Set(Array.from({ length: 1000 }, newSessionId));
    expect(ids.size).toBe(1000);
  });
});

describe('Registry', () => {
  it('running() lists the sessions that run, through ends, a replacement and a delete, and never looks at an ended one', async () => {
    const clock = fakeClock();
    const r = new Registry();
    const [a, b, c] = ['aaaa', 'bbbb', 'cccc'].map((id) => session(id, 'alice', clock.now));
    const other = session('dddd', 'bob', clock.now);
    for (const s of [a, b, c, other]) r.add(s);
    expect(r.running('alice')).toEqual([a, b, c]);
    expect(r.running()).toEqual([a, b, c, other]);
    b.finish({ exitCode: 0, signal: null });
    // Ended: not running from that moment, before any later turn.
    expect(r.running('alice')).toEqual([a, c]);
    await b.finished;
    await Promise.resolve();
    // An ended session kept for its TTL costs an exec's start nothing: it is not even asked whether it runs.
    Object.defineProperty(b, 'running', { get: () => expect.fail('running() looked at an ended session') });
    expect(r.running('alice')).toEqual([a, c]);
    // An approved exec's session takes the place of the one that waited for it.
    const c2 = session('cccc', 'alice', clock.now);
    r.add(c2);
    expect(r.running('alice')).toEqual([a, c2]);
    r.delete('aaaa');
    expect(r.running('alice')).toEqual([c2]);
    expect(r.running()).toEqual([other, c2]);
  });

  it('gets a session of its own scope', () => {
    const clock = fakeClock();
    const r = new Registry();
    const s = session('aaaa', 'alice', clock.now);
    r.add(s);
    expect(r.get('alice', 'aaaa')).toBe(s);
  });

  it('answers not_found for another scope, exactly as for a missing id', () => {
    const clock = fakeClock();
    const r = new Registry();
    r.add(session('aaaa', 'alice', clock.now));
    const other = notFoundError(() => r.get('bob', 'aaaa'));
    const missing = notFoundError(() => r.get('bob', 'zzzz'));
    expect(other.message).toContain('aaaa');
    expect(other.message.replace('aaaa', 'ID')).toBe(missing.message.replace('zzzz', 'ID'));
  });

  it('lists only the scope\'s sessions, newest first', () => {
    const clock = fakeClock();
    const r = new Registry();
    r.add(session('a1', 'alice', clock.now));
    clock.advance(10);
    r.add(session('b1', 'bob', clock.now));
    clock.advance(10);
    r.add(session('a2', 'alice', clock.now));
    clock.advance(10);
    r.add(session('a3', 'alice', clock.now));
    expect(r.list('alice').map((s) => s.id)).toEqual(['a3', 'a2', 'a1']);
    expect(r.list('bob').map((s) => s.id)).toEqual(['b1']);
    expect(r.list('carol')).toEqual([]);
  });

  it('counts running and finished sessions, and lists running ones per scope', () => {
    const clock = fakeClock();
    const r = new Registry();
    const a = session('a', 'alice', clock.now);
    const b = session('b', 'alice', clock.now);
    const c = session('c', 'bob', clock.now);
    for (const s of [a, b, c]) r.add(s);
    b.finish({ exitCode: 0, signal: null });
    expect(r.counts()).toEqual({ running: 2, finished: 1 });
    expect(r.running('alice').map((s) => s.id)).toEqual(['a']);
    expect(r.running().map((s) => s.id).sort()).toEqual(['a', 'c']);
  });

  it('forgets a deleted session', () => {
    const clock = fakeClock();
    const r = new Registry();
    r.add(session('a', 'alice', clock.now));
    r.delete('a');
    notFoundError(() => r.get('alice', 'a'));
    expect(r.list('alice')).toEqual([]);
  });

  it('gives ids that are not in use', () => {
    const r = new Registry();
    const clock = fakeClock();
    for (let i = 0; i < 50; i++) r.add(session(r.newId(), 'x', clock.now));
    expect(new Set(r.list('x').map((s) => s.id)).size).toBe(50);
  });

  describe('reap', () => {
    /** What the daemon does each round: forget what has expired. */
    const reap = (r: Registry, now: number, ttl: number) => {
      const expired = r.expired(now, ttl);
      for (const s of expired) r.delete(s.id);
      return expired;
    };

    it('forgets finished sessions once their TTL has passed, never running ones', () => {
      const clock = fakeClock();
      const r = new Registry();
      const running = session('run', 'alice', clock.now);
      const early = session('early', 'alice', clock.now);
      const late = session('late', 'bob', clock.now);
      for (const s of [running, early, late]) r.add(s);

      clock.advance(1000);
      early.finish({ exitCode: 0, signal: null });
      clock.advance(1000);
      late.finish({ exitCode: 1, signal: null });

      const ttl = 60_000;
      expect(reap(r, clock.now(), ttl)).toEqual([]);

      clock.set(early.endedAt! + ttl - 1);
      expect(reap(r, clock.now(), ttl)).toEqual([]);

      clock.set(early.endedAt! + ttl);
      expect(reap(r, clock.now(), ttl).map((s) => s.id)).toEqual(['early']);
      notFoundError(() => r.get('alice', 'early'));
      expect(r.get('bob', 'late')).toBe(late);

      clock.advance(10 * ttl);
      expect(reap(r, clock.now(), ttl).map((s) => s.id)).toEqual(['late']);
      expect(r.list('alice').map((s) => s.id)).toEqual(['run']);
      expect(r.counts()).toEqual({ running: 1, finished: 0 });
    });

    it('does not reap the same session twice', () => {
      const clock = fakeClock();
      const r = new Registry();
      const s = session('a', 'alice', clock.now);
      r.add(s);
      s.finish({ exitCode: 0, signal: null });
      clock.advance(100);
      expect(reap(r, clock.now(), 50)).toHaveLength(1);
      expect(reap(r, clock.now(), 50)).toHaveLength(0);
    });
  });
});

describe('expiredSessions', () => {
  it('picks finished sessions whose age is at least the TTL', () => {
    const clock = fakeClock(0);
    const a = session('a', 's', clock.now);
    const b = session('b', 's', clock.now);
    const c = session('c', 's', clock.now);
    clock.set(100);
    a.finish({ exitCode: 0, signal: null });
    clock.set(200);
    b.finish({ exitCode: null, signal: 'SIGTERM' });
    expect(expiredSessions([a, b, c], 150, 50).map((s) => s.id)).toEqual(['a']);
    expect(expiredSessions([a, b, c], 250, 50).map((s) => s.id)).toEqual(['a', 'b']);
    expect(expiredSessions([a, b, c], 149, 50)).toEqual([]);
    expect(expiredSessions([c], 1e12, 1)).toEqual([]);
  });
});

describe('Session with a fake clock', () => {
  it('records start, end and runtime from the clock', () => {
    const clock = fakeClock(5000);
    const s = session('a', 's', clock.now);
    expect(s.startedAt).toBe(5000);
    expect(s.running).toBe(true);
    clock.advance(250);
    expect(s.runtimeMs).toBe(250);
    s.finish({ exitCode: 0, signal: null });
    clock.advance(1000);
    expect(s.endedAt).toBe(5250);
    expect(s.runtimeMs).toBe(250);
    expect(s.running).toBe(false);
  });

  it.each([
    [{ exitCode: 0, signal: null }, 'completed', undefined],
    [{ exitCode: 3, signal: null }, 'completed', undefined],
    [{ exitCode: 127, signal: null }, 'failed', 'command_not_found'],
    [{ exitCode: 126, signal: null }, 'failed', 'not_executable'],
    [{ exitCode: null, signal: 'SIGKILL' }, 'failed', 'signal'],
    [{ exitCode: null, signal: null, error: 'spawn ENOENT' }, 'failed', 'spawn_error'],
  ] as const)('finish(%j) → %s (%s)', (outcome, status, reason) => {
    const s = session('a', 's', fakeClock().now);
    s.finish(outcome);
    expect(s.status).toBe(status);
    expect(s.reason).toBe(reason);
    expect(s.exitCode).toBe(outcome.exitCode);
  });

  it('a stopped session fails with the stop reason, keeping its exit code', () => {
    const clock = fakeClock();
    const s = session('a', 's', clock.now);
    s.requestStop({ reason: 'timeout', signal: 'SIGTERM', at: clock.now() });
    s.finish({ exitCode: 0, signal: null });
    expect(s.status).toBe('failed');
    expect(s.reason).toBe('timeout');
    expect(s.exitCode).toBe(0);
  });

  it('finishes once', async () => {
    const clock = fakeClock();
    const s = session('a', 's', clock.now);
    s.finish({ exitCode: 0, signal: null });
    clock.advance(10);
    s.finish({ exitCode: 1, signal: null });
    expect(s.exitCode).toBe(0);
    expect(s.endedAt).toBe(clock.now() - 10);
    await expect(s.finished).resolves.toBeUndefined();
  });

  it('flushes an incomplete character at the end and closes stdin', () => {
    const s = session('a', 's', fakeClock().now);
    expect(s.stdinOpen).toBe(true);
    s.onOutput('stdout', Buffer.from('€', 'utf8').subarray(0, 1));
    s.finish({ exitCode: 0, signal: null });
    expect(s.output.text()).toBe('\uFFFD');
    expect(s.stdinOpen).toBe(false);
  });

  it('emits events with the clock\'s time to subscribers of its scope only', () => {
    const clock = fakeClock(42);
    const bus = new EventBus();
    const mine: unknown[] = [];
    const theirs: unknown[] = [];
    bus.add({ scope: 's', deliver: (e) => mine.push(e) });
    bus.add({ scope: 'other', deliver: (e) => theirs.push(e) });
    const s = session('a', 's', clock.now, bus);
    s.onOutput('stdout', Buffer.from('hi'));
    expect(mine).toEqual([{ type: 'output', sessionId: 'a', scope: 's', at: 42, stream: 'stdout', data: 'hi', offset: 0 }]);
    expect(theirs).toEqual([]);
  });
});
