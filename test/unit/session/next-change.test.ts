import { describe, expect, it } from 'vitest';
import { makeSession } from './make-session.js';

const session = () => makeSession('sess', 'default', { stdin: 'pipe', maxOutputChars: 1000, pendingMaxOutputChars: 100, now: () => 0 });

/** Whether the promise has settled by the end of this turn's microtasks. */
async function settled(p: Promise<void>): Promise<boolean> {
  let done = false;
  void p.then(() => (done = true));
  await new Promise((r) => setImmediate(r));
  return done;
}

describe('Session.nextChange (what process wait sleeps on)', () => {
  it('is not woken by output, and is woken by the end', async () => {
    const s = session();
    const change = s.nextChange(new AbortController().signal);
    for (let i = 0; i < 100; i++) s.onOutput('stdout', Buffer.from(`line ${i}\n`));
    expect(await settled(change)).toBe(false);
    s.finish({ exitCode: 0, signal: null });
    expect(await settled(change)).toBe(true);
  });

  it('is woken when its signal aborts, and by a restart about to answer every waiter', async () => {
    const s = session();
    const stop = new AbortController();
    const aborted = s.nextChange(stop.signal);
    stop.abort();
    expect(await settled(aborted)).toBe(true);
    const restart = s.nextChange(new AbortController().signal);
    s.wakeWaiters();
    expect(await settled(restart)).toBe(true);
  });
});
