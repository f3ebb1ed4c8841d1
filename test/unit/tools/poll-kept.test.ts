import { describe, expect, it } from 'vitest';
import { uncancelled } from '../../helpers/session.js';
import { cliVoice, RPC } from '../../../src/schema/voice.js';
import { EventBus } from '../../../src/session/events.js';
import { Registry } from '../../../src/session/registry.js';
import { Session } from '../../../src/session/session.js';
import type { CallContext, Daemon } from '../../../src/tools/context.js';
import { JsonText } from '../../../src/tools/json-text.js';
import { pollAction } from '../../../src/tools/process/poll.js';

/** A poll of `s1` now, in `voice`: the answer as given, and its value. */
function poll(d: Daemon, voice = RPC) {
  const ctx: CallContext = { scope: 'default', ...uncancelled(), voice };
  const answer = pollAction(d, ctx, { action: 'poll', sessionId: 's1' });
  if (answer instanceof Promise) throw new Error('a poll without a timeout answered a promise');
  return { answer, value: (answer instanceof JsonText ? answer.value : answer) as Record<string, unknown> };
}

// A quiet poll (nothing new since the last) of a session whose state did not move is the same bytes
// as the last one: the daemon gives the answer it kept, and makes a new one only when something the
// answer says has changed.
describe('a quiet poll', () => {
  function setUp() {
    const registry = new Registry();
    const s = new Session({ id: 's1', scope: 'default', command: 'cat', name: 'cat', cwd: '/', stdin: 'pipe', maxOutputChars: 1000, pendingMaxOutputChars: 1000, events: new EventBus(), now: () => 0 });
    registry.add(s);
    return { s, d: { registry } as unknown as Daemon };
  }

  it('is answered with the kept answer once its advice settles, and anew after output, a change of state or another voice', () => {
    const { s, d } = setUp();
    // Each quiet poll in a row advises a longer wait (SPEC §6) until the longest: each is a new answer.
    const retries: unknown[] = [];
    let last = poll(d);
    for (let i = 0; i < 6; i++) {
      retries.push(last.value.retryInMs);
      last = poll(d);
    }
    expect(retries).toEqual([1000, 5000, 10_000, 30_000, 60_000, 60_000]);
    // At the longest, the answer is the one kept: the same object, the same words.
    const again = poll(d);
    expect(again.answer).toBe(last.answer);
    expect(again.value).toEqual(last.value);
    expect(again.value.text).toMatch(/no new output/);

    // New output is answered with it (never a kept answer), and the quiet poll after says so anew.
    s.onOutput('stdout', 'hello\n');
    const loud = poll(d);
    expect(loud.value.output).toBe('hello\n');
    expect(loud.answer).not.toBe(last.answer);
    const after = poll(d);
    expect(after.value).toMatchObject({ output: '', retryInMs: 1000 });

    // A change of what it shows (a checkpoint here) makes a new answer that says it.
    for (let i = 0; i < 5; i++) poll(d);
    const settled = poll(d);
    expect(poll(d).answer).toBe(settled.answer);
    s.addCheckpoint('built', { step: 2 });
    const marked = poll(d);
    expect(marked.answer).not.toBe(settled.answer);
    expect(marked.value.checkpoint).toMatchObject({ name: 'built', data: { step: 2 } });
    expect(poll(d).answer).toBe(marked.answer);

    // Another voice has other words: its own answer.
    const cli = poll(d, cliVoice());
    expect(cli.answer).not.toBe(marked.answer);
    expect(cli.value.text).not.toEqual(marked.value.text);
  });

  it('of a session that ended is answered with how it ended, not a kept answer of it running', () => {
    const { s, d } = setUp();
    for (let i = 0; i < 6; i++) poll(d);
    const running = poll(d);
    expect(running.value.status).toBe('running');
    s.finish({ exitCode: 0, signal: null });
    const ended = poll(d);
    expect(ended.answer).not.toBe(running.answer);
    expect(ended.value).toMatchObject({ status: 'completed', exitCode: 0 });
    expect(ended.value.retryInMs).toBeUndefined();
  });
});
