import { describe, expect, it } from 'vitest';
import { uncancelled } from '../../helpers/session.js';
import { RPC } from '../../../src/schema/voice.js';
import { EventBus } from '../../../src/session/events.js';
import { Registry } from '../../../src/session/registry.js';
import { Session } from '../../../src/session/session.js';
import type { CallContext, Daemon } from '../../../src/tools/context.js';
import { listAction } from '../../../src/tools/process/list.js';
import type { JsonText } from '../../../src/tools/json-text.js';

function daemonWith(n: number) {
  const registry = new Registry();
  for (let i = 0; i < n; i++) {
    registry.add(new Session({ id: `s${i}`, scope: 'default', command: `echo ${i}`, name: `echo-${i}`, cwd: '/', stdin: 'pipe', maxOutputChars: 1000, pendingMaxOutputChars: 1000, events: new EventBus(), now: () => 0 }));
  }
  const d = { registry } as unknown as Daemon;
  const ctx: CallContext = { scope: 'default', ...uncancelled(), voice: RPC };
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

describe('process list pages, kept and written again', () => {
  it('answers each page in order, newest first, as sessions come and their running times move', () => {
    let clock = 0;
    const registry = new Registry();
    const add = (i: number) =>
      registry.add(new Session({ id: `s${i}`, scope: 'default', command: `echo ${i}`, name: `echo-${i}`, cwd: '/', stdin: 'pipe', maxOutputChars: 1000, pendingMaxOutputChars: 1000, events: new EventBus(), now: () => clock }));
    for (let i = 0; i < 7; i++) add(i);
    const d = { registry } as unknown as Daemon;
    const ctx: CallContext = { scope: 'default', ...uncancelled(), voice: RPC };
    const page = (offset: number, limit: number) => {
      const r = listAction(d, ctx, { action: 'list', offset, limit }) as JsonText;
      const v = r.value as { sessions: { sessionId: string; runtimeMs: number }[]; total: number };
      // Written out: its copy may carry the next answer.
      r.written?.();
      return v;
    };
    const ids = (v: { sessions: { sessionId: string }[] }) => v.sessions.map((x) => x.sessionId);
    expect(ids(page(0, 3))).toEqual(['s6', 's5', 's4']);
    expect(ids(page(3, 3))).toEqual(['s3', 's2', 's1']);
    expect(ids(page(6, 3))).toEqual(['s0']);
    // Asked again and again (from the kept page), then with the times moved: one digit, then more digits than kept.
    for (const [now, want] of [[0, 0], [0, 0], [7, 7], [9, 9], [12, 12], [12, 12], [100_000, 100_000]] as const) {
      clock = now;
      const v = page(0, 3);
      expect(ids(v)).toEqual(['s6', 's5', 's4']);
      expect(v.sessions.map((x) => x.runtimeMs)).toEqual([want, want, want]);
    }
    // A new session is first; the rest move down a place.
    add(7);
    const after = page(0, 3);
    expect(ids(after)).toEqual(['s7', 's6', 's5']);
    expect(after.total).toBe(8);
    expect(after.sessions.map((x) => x.runtimeMs)).toEqual([0, 100_000, 100_000]);
    expect(ids(page(3, 3))).toEqual(['s4', 's3', 's2']);
    // One forgotten: the pages close up.
    registry.delete('s5');
    expect(ids(page(0, 3))).toEqual(['s7', 's6', 's4']);
    expect(ids(page(3, 10))).toEqual(['s3', 's2', 's1', 's0']);
  });
});

// A kept page asked again is answered from its bytes without a look at any of its sessions while
// nothing it was made from moved (tools/process/list.ts, stampOf): each change must still show at once.
describe('process list answers a kept page without looking at its sessions, and sees every change', () => {
  it('output, a ports look, a checkpoint and an end each show at the next call; running times move meanwhile', () => {
    let clock = 1000;
    const registry = new Registry();
    const sessions = [0, 1, 2].map((i) => new Session({ id: `k${i}`, scope: 'default', command: `cmd ${i}`, name: `cmd-${i}`, cwd: '/', stdin: 'pipe', maxOutputChars: 1000, pendingMaxOutputChars: 1000, events: new EventBus(), now: () => clock }));
    for (const s of sessions) registry.add(s);
    const d = { registry } as unknown as Daemon;
    const ctx: CallContext = { scope: 'default', ...uncancelled(), voice: RPC };
    const page = () => {
      const r = listAction(d, ctx, { action: 'list', limit: 3 }) as JsonText;
      r.written?.();
      return new Map((r.value as { sessions: Record<string, any>[] }).sessions.map((x) => [x.sessionId as string, x]));
    };
    for (let i = 0; i < 3; i++) expect(page().get('k1')!.tail).toBe('');
    clock = 1500;
    expect(page().get('k2')!.runtimeMs).toBe(500);
    sessions[1].output.write('stdout', 'hello\n');
    expect(page().get('k1')!.tail).toBe('hello\n');
    sessions[0].notePorts([{ address: '127.0.0.1', port: 8080 }] as never);
    expect(page().get('k0')!.ports).toEqual([{ address: '127.0.0.1', port: 8080 }]);
    sessions[2].finish({ exitCode: 0, signal: null });
    clock = 2500;
    const ended = page().get('k2')!;
    expect(ended).toMatchObject({ status: 'completed', exitCode: 0, runtimeMs: 500 });
    // Running ones go on; the ended one's time stays.
    expect(page().get('k1')!.runtimeMs).toBe(1500);
    clock = 3000;
    expect([page().get('k1')!.runtimeMs, page().get('k2')!.runtimeMs]).toEqual([2000, 500]);
  });
});
