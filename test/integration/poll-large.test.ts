import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import { Scopes, sharedDaemon } from '../helpers/session.js';

let scopes: Scopes;
sharedDaemon({}, (x) => ({ scopes } = x));

// A poll whose output is large goes out as JSON bytes made a slice at a time (tools/json-answer.ts).
describe('a poll of a large output', () => {
  it('answers every character in output, and says a run of NULs by its length in text', async () => {
    const s = scopes.next('poll-large');
    const r = await s.exec({ command: "head -c 28000 /dev/zero; printf 'é end\\n'; exec sleep 30", background: true });
    // All of it pending (under the 30,000-character cap), then one poll takes it.
    await waitFor(async () => ((await s.process({ action: 'log', sessionId: r.sessionId })).output as string).endsWith('é end'), { what: 'the output to be written' });
    const last = await s.process({ action: 'poll', sessionId: r.sessionId });
    expect(last.output).toBe(`${'\0'.repeat(28000)}é end\n`);
    expect(last.droppedChars).toBeUndefined();
    // The text: the output, its run of NULs said by its length, then where the session stands.
    expect(last.text).toBe(`[28000 NUL characters]é end\n${last.text.split('\n').at(-1)}`);
    expect(last.text.split('\n').at(-1)).toMatch(/^Session .* is still running; poll again/);
    expect(last.status).toBe('running');
    expect(last.retryInMs).toBe(1000);
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});
