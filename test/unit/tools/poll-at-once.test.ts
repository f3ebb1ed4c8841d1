import { describe, expect, it } from 'vitest';
import { uncancelled } from '../../helpers/session.js';
import { RPC } from '../../../src/schema/voice.js';
import { EventBus } from '../../../src/session/events.js';
import { Registry } from '../../../src/session/registry.js';
import { Session } from '../../../src/session/session.js';
import type { CallContext, Daemon } from '../../../src/tools/context.js';
import { pollAction } from '../../../src/tools/process/poll.js';
import { JsonText } from '../../../src/tools/json-text.js';

const isThenable = (v: unknown) => typeof (v as { then?: unknown } | null)?.then === 'function';
const valueOf = (v: unknown) => (v instanceof JsonText ? v.value : v);

// An answer at hand goes out in the turn its request was read, never held in the connection's map of
// requests in flight (rpc/connection.ts): every poll an agent makes is one.
describe('process poll answers at once when it does not wait', () => {
  it('answers a poll without a timeout as a value, not a promise; one with a timeout waits for a change', async () => {
    const registry = new Registry();
    const s = new Session({ id: 's1', scope: 'default', command: 'echo 1', name: 'echo-1', cwd: '/', stdin: 'pipe', maxOutputChars: 1000, pendingMaxOutputChars: 1000, events: new EventBus(), now: () => 0 });
    registry.add(s);
    const d = { registry } as unknown as Daemon;
    const ctx: CallContext = { scope: 'default', ...uncancelled(), voice: RPC };

    const now = pollAction(d, ctx, { action: 'poll', sessionId: 's1' });
    expect(isThenable(now)).toBe(false);
    // A quiet poll's answer is kept made (poll-kept.test.ts): its value is the result.
    expect(valueOf(now)).toMatchObject({ sessionId: 's1', output: '' });

    // A session that is not there is an error thrown at once, which the connection answers as one.
    expect(() => pollAction(d, ctx, { action: 'poll', sessionId: 'nope' })).toThrow(/nope/);

    // With a timeout a running session's poll waits for its output (or the timeout) and answers then.
    expect(s.running).toBe(true);
    const later = pollAction(d, ctx, { action: 'poll', sessionId: 's1', timeout: 50 });
    expect(isThenable(later)).toBe(true);
    s.onOutput('stdout', 'hello\n');
    expect(valueOf(await later)).toMatchObject({ sessionId: 's1', output: 'hello\n' });
  });
});
