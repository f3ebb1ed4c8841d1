import { describe, expect, it } from 'vitest';
import { RPC } from '../../../src/schema/voice.js';
import { EventBus } from '../../../src/session/events.js';
import { Registry } from '../../../src/session/registry.js';
import { Session } from '../../../src/session/session.js';
import type { CallContext, Daemon } from '../../../src/tools/context.js';
import { listAction } from '../../../src/tools/process/list.js';

function daemonWith(n: number) {
  const registry = new Registry();
  for (let i = 0; i < n; i++) {
    registry.add(new Session({ id: `s${i}`, scope: 'default', command: `echo ${i}`, name: `echo-${i}`, cwd: '/', stdin: 'pipe', maxOutputChars: 1000, pendingMaxOutputChars: 1000, events: new EventBus(), now: () => 0 }));
  }
  const d = { registry } as unknown as Daemon;
  const ctx: CallContext = { scope: 'default', signal: new AbortController().signal, voice: RPC };
  return () => listAction(d, ctx, { action: 'list' });
}

// A new buffer per answer is memory outside the JS heap, whose growth V8 answers with full collections.
describe('process list answers the same page from buffers it has written before', () => {
  it('writes an answer over a copy the transport is done with, and never over one still on its way out', () => {
    const list = daemonWith(5);
    // The answer that makes the page is the page's own kept bytes: never handed back to be written over.
    expect(list().written).toBeUndefined();
    const first = list();
    const second = list();
    // Neither is written yet: each answer has its own bytes.
    expect(second.bytes).not.toBe(first.bytes);
    expect(second.bytes.buffer === first.bytes.buffer && second.bytes.byteOffset === first.bytes.byteOffset).toBe(false);
    expect(first.written).toBeTypeOf('function');

    first.written!();
    const third = list();
    expect(third.bytes).toBe(first.bytes);
    // The same answer, whichever buffer carries it.
    expect(third.value).toEqual(second.value);
    expect((third.value as { sessions: unknown[] }).sessions).toHaveLength(5);

    // Given back twice over, a copy is still handed to one answer at a time.
    third.written!();
    second.written!();
    const a = list();
    const b = list();
    expect(a.bytes).not.toBe(b.bytes);
    expect([a.bytes, b.bytes]).toEqual(expect.arrayContaining([third.bytes, second.bytes]));
  });
});
