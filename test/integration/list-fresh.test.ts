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
});
