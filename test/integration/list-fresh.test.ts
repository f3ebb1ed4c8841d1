import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { Scopes, sharedDaemon } from '../helpers/session.js';

let scopes: Scopes;
sharedDaemon({}, (x) => ({ scopes } = x));

const entry = async (s: ReturnType<Scopes['next']>, id: string) => {
  const r = await s.process({ action: 'list' });
  return { record: r.sessions.find((x: any) => x.sessionId === id), text: r.text as string };
};

// list keeps each session's entry between calls: every change must still show at the next call.
describe('process list shows each change at the next call', () => {
  it('output, running time, a checkpoint and the end of a session', async () => {
    const s = scopes.next('list-fresh');
    const r = await s.exec({ command: 'while read l; do echo "got $l"; done', background: true });
    const first = await entry(s, r.sessionId);
    expect(first.record).toMatchObject({ status: 'running', tail: '', pid: r.pid });
    expect(first.text).toContain(`${r.sessionId}  running`);

    await s.process({ action: 'write', sessionId: r.sessionId, data: 'one\n' });
    await s.waitOutput(r.sessionId, 'got one');
    const second = await entry(s, r.sessionId);
    expect(second.record.tail).toBe('got one\n');
    await waitFor(async () => (await entry(s, r.sessionId)).record.runtimeMs > second.record.runtimeMs, { what: 'runtimeMs to grow' });

    await s.request('checkpoint', { sessionId: r.sessionId, name: 'halfway', data: { n: 1 } });
    expect((await entry(s, r.sessionId)).record.checkpoint).toMatchObject({ name: 'halfway', data: { n: 1 } });

    const killed = await s.process({ action: 'kill', sessionId: r.sessionId });
    const last = await entry(s, r.sessionId);
    expect(last.record).toMatchObject({ status: killed.status, reason: 'user', signal: killed.signal, stop: { by: 'user' } });
    expect(last.record.endedAt).toBe(killed.endedAt);
    expect(last.text).toContain(`${r.sessionId}  ${killed.status}`);
    // The same record kill answered with, its text aside.
    const { text: _text, ...answered } = killed;
    expect(last.record).toEqual(answered);
  });

  // An unchanged page is answered from the bytes of the last one with the running times written
  // again in place; a time that needs one more digit, a new session or another page makes it anew.
  it('the same page asked again: times move, nothing else does, and other pages stay apart', async () => {
    const s = scopes.next('list-again');
    const a = await s.exec({ command: 'sleep 60', background: true });
    try {
      const runtime = async () => (await entry(s, a.sessionId)).record.runtimeMs as number;
      const first = await entry(s, a.sessionId);
      let last = first.record.runtimeMs as number;
      // Past 1,000 ms (a fourth digit) and on, each answer whole JSON with a time no smaller than before.
      await waitFor(
        async () => {
          const now = await runtime();
          expect(now).toBeGreaterThanOrEqual(last);
          last = now;
          return now > 1200;
        },
        { what: 'runtimeMs past 1,200 ms' },
      );
      // resources is a sample the daemon refreshes each second: it may move as well.
      const { runtimeMs: _r1, resources: _u1, ...before } = first.record;
      const { runtimeMs: _r2, resources: _u2, ...after } = (await entry(s, a.sessionId)).record;
      expect(after).toEqual(before);

      const b = await s.exec({ command: 'sleep 60', background: true });
      const both = await s.process({ action: 'list' });
      expect(both.sessions.map((x: any) => x.sessionId)).toEqual([b.sessionId, a.sessionId]);
      expect(both.total).toBe(2);
      const newest = await s.process({ action: 'list', limit: 1 });
      const older = await s.process({ action: 'list', offset: 1, limit: 1 });
      expect(newest.sessions.map((x: any) => x.sessionId)).toEqual([b.sessionId]);
      expect(older.sessions.map((x: any) => x.sessionId)).toEqual([a.sessionId]);
      expect((await s.process({ action: 'list', limit: 1 })).sessions.map((x: any) => x.sessionId)).toEqual([b.sessionId]);
      expect((await s.process({ action: 'list' })).sessions).toHaveLength(2);
      await s.process({ action: 'kill', sessionId: b.sessionId });
    } finally {
      await s.process({ action: 'kill', sessionId: a.sessionId });
    }
  });
});
