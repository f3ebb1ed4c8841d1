import { ExportResultCode } from '@opentelemetry/core';
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider, type ReadableSpan, type SpanExporter, type SpanProcessor } from '@opentelemetry/sdk-trace';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { BoundedSpanProcessor, CountingSpanExporter, ExportCounts } from '../../../src/telemetry/counting.js';
import { SessionSpans } from '../../../src/telemetry/spans.js';

// The pure parts of the OpenTelemetry export (src/telemetry/): spans from audit events, and counting.
const silent = pino({ level: 'silent' });

function tracing() {
  const memory = new InMemorySpanExporter();
  const provider = new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter: memory })] });
  let dropped = 0;
  const spans = new SessionSpans(provider.getTracer('test'), () => dropped++);
  /** The spans ended so far, once the processor has handed them on. */
  const finished = async () => {
    await provider.forceFlush();
    return memory.getFinishedSpans();
  };
  return { spans, finished, dropped: () => dropped };
}

const start = (sessionId: string) =>
  ({ type: 'session', sessionId, scope: 's', peer: { uid: 1000, pid: 42, exe: '/usr/bin/node' }, client: { kind: 'cli' }, host: 'h', command: 'make', workdir: '/w', sandbox: 'off', network: 'host', changes: 'direct', elevated: false }) as const;
const end = (sessionId: string, status = 'completed', runtimeMs = 5) =>
  ({ type: 'end', sessionId, scope: 's', status, exit: status === 'completed' ? 0 : null, signal: null, reason: status === 'failed' ? 'timeout' : null, runtimeMs, resources: null, outputBytes: 3 }) as const;

describe('SessionSpans', () => {
  it('makes one procctl.exec span a session: attributes at start and end, decision and answer as events', async () => {
    const t = tracing();
    t.spans.take(start('a'));
    t.spans.take({ type: 'decision', sessionId: 'a', scope: 's', action: 'ask', part: 'make', rule: 2, reason: 'why' });
    t.spans.take({ type: 'answer', sessionId: 'a', scope: 's', kind: 'approval', answer: 'approve', by: 'console' });
    t.spans.take(start('a'));
    expect(await t.finished()).toHaveLength(0);
    t.spans.take(end('a'));
    const all = await t.finished();
    expect(all).toHaveLength(1);
    const [span] = all;
    expect(span.name).toBe('procctl.exec');
    expect(span.attributes).toMatchObject({ 'procctl.session.id': 'a', 'procctl.command': 'make', 'procctl.peer.pid': 42, 'procctl.client.kind': 'cli', 'procctl.status': 'completed', 'procctl.exit_code': 0, 'procctl.output_bytes': 3 });
    expect(span.events.map((e) => [e.name, e.attributes])).toEqual([
      ['procctl.decision', { 'procctl.decision.action': 'ask', 'procctl.decision.part': 'make', 'procctl.decision.rule': 2, 'procctl.decision.reason': 'why' }],
      ['procctl.answer', { 'procctl.answer.kind': 'approval', 'procctl.answer': 'approve', 'procctl.answer.by': 'console' }],
    ]);
    expect(span.status.code).toBe(0);
  });

  it('marks a failed session as an error, starts a span it did not see start at its start, and sends what is open at shutdown', async () => {
    const t = tracing();
    t.spans.take(start('f'));
    t.spans.take(end('f', 'failed'));
    t.spans.take(end('lost', 'failed', 60_000));
    t.spans.take(start('open'));
    t.spans.endAll();
    const [failed, lost, open] = await t.finished();
    expect(failed.status).toEqual({ code: 2, message: 'timeout' });
    const ms = (hr: [number, number]) => hr[0] * 1000 + hr[1] / 1e6;
    expect(ms(lost.endTime) - ms(lost.startTime)).toBeGreaterThanOrEqual(59_000);
    expect(open.attributes['procctl.open_at_shutdown']).toBe(true);
  });
});

describe('counting', () => {
  /** An exporter whose results the test gives, one batch at a time. */
  function heldExporter() {
    const pending: ((ok: boolean) => void)[] = [];
    const inner: SpanExporter = {
      export: (_spans, done) => pending.push((ok) => done(ok ? { code: ExportResultCode.SUCCESS } : { code: ExportResultCode.FAILED, error: new Error('connect ECONNREFUSED') })),
      shutdown: async () => undefined,
    };
    return { inner, pending };
  }

  it('counts spans exported and dropped, keeps the last error, and refuses spans past the bound', () => {
    const counts = new ExportCounts(silent);
    const { inner, pending } = heldExporter();
    const exporter = new CountingSpanExporter(inner, counts);
    // A processor that hands each span to the exporter at once, as a batch of one.
    const direct: SpanProcessor = {
      onStart: () => undefined,
      onEnd: (s) => exporter.export([s], () => undefined),
      forceFlush: async () => undefined,
      shutdown: async () => undefined,
    };
    const bounded = new BoundedSpanProcessor(direct, counts, 2);
    const span = {} as ReadableSpan;
    bounded.onEnd(span);
    bounded.onEnd(span);
    bounded.onEnd(span);
    expect(counts).toMatchObject({ inFlight: 2, exported: 0, dropped: 1 });
    pending.shift()!(true);
    pending.shift()!(false);
    expect(counts).toMatchObject({ inFlight: 0, exported: 1, dropped: 2 });
    expect(counts.lastError).toMatchObject({ signal: 'traces', message: 'connect ECONNREFUSED' });
    bounded.onEnd(span);
    expect(counts.inFlight).toBe(1);
  });

  it('counts metric readings apart from spans', () => {
    const counts = new ExportCounts(silent);
    counts.settle('metrics', 1, { code: ExportResultCode.SUCCESS });
    counts.settle('metrics', 1, { code: ExportResultCode.FAILED });
    expect(counts.metrics).toEqual({ exported: 1, dropped: 1 });
    expect(counts).toMatchObject({ exported: 0, dropped: 0 });
    expect(counts.lastError).toMatchObject({ signal: 'metrics', message: 'the export failed' });
  });
});
