import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { OtlpReceiver, type ReceivedMetric, type ReceivedSpan } from '../helpers/otlp.js';
import type { TestClient } from '../helpers/rpc.js';
import { cli } from '../cli/run.js';

// OpenTelemetry export (SPEC §18, docs/telemetry.md): a real daemon sends to an OTLP/HTTP receiver
// the test runs, which decodes the protobuf bodies with the protocol's own definitions.
const RULES = [
  { match: 'otlp-ask', action: 'ask', reason: 'a person decides' },
  { match: 'otlp-deny', action: 'deny', reason: 'not here' },
];

/** `procctl ARGS` against the test daemon. */
const procctl = (d: TestDaemon, args: string[]) => cli(['--socket', d.socket, ...args]);

describe('telemetry.otlp.endpoint', () => {
  let receiver: OtlpReceiver;
  let d: TestDaemon;
  let c: TestClient;

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    d = await startDaemon({ config: { approvals: { rules: RULES }, telemetry: { otlp: { endpoint: receiver.endpoint, intervalMs: 200 } } } });
    c = await d.client();
  });
  afterAll(async () => {
    c?.close();
    await d?.stop();
    await receiver?.stop();
  });

  const spanOf = (sessionId: string) => waitFor(() => receiver.spans.find((s) => s.attributes['procctl.session.id'] === sessionId), { timeoutMs: 30_000, what: `the span of ${sessionId}` });
  const status = async () => (await c.call('daemon.status')).telemetry;

  it('sends each session as a procctl.exec span over OTLP/HTTP protobuf, with what it ran and how it ended', async () => {
    const r = await c.exec({ command: 'echo otlp-one; exit 3', workdir: '/tmp' });
    expect(r.status).toBe('completed');
    const span: ReceivedSpan = await spanOf(r.sessionId);
    expect(span.name).toBe('procctl.exec');
    expect(span.attributes).toMatchObject({
      'procctl.scope': 'default',
      'procctl.command': 'echo otlp-one; exit 3',
      'procctl.workdir': '/tmp',
      'procctl.sandbox': 'off',
      'procctl.status': 'completed',
      'procctl.exit_code': 3,
      'procctl.changes': 'direct',
      'procctl.client.kind': 'rpc',
    });
    expect(span.attributes['procctl.runtime_ms']).toBeGreaterThanOrEqual(0);
    expect(span.resource['service.name']).toBe('procctld');
    expect(BigInt(span.endTimeUnixNano)).toBeGreaterThanOrEqual(BigInt(span.startTimeUnixNano));
    // The rules judged it: allowed, by approvals.default.
    expect(span.events.find((e) => e.name === 'procctl.decision')?.attributes).toMatchObject({ 'procctl.decision.action': 'allow' });
    expect(receiver.requests.find((q) => q.path === '/v1/traces')?.contentType).toBe('application/x-protobuf');
  });

  it('puts the decision and, for an ask rule answered with resume, the answer and who gave it on the span', async () => {
    const asked = await c.exec({ command: 'echo otlp-ask' });
    expect(asked.status).toBe('approval_required');
    const ran = await c.process({ action: 'resume', sessionId: asked.sessionId, input: { confirm: true }, ...asPerson(d) });
    expect(ran.status).toBe('completed');
    const span = await spanOf(asked.sessionId);
    const decision = span.events.find((e) => e.name === 'procctl.decision');
    expect(decision?.attributes).toMatchObject({ 'procctl.decision.action': 'ask', 'procctl.decision.rule': 0, 'procctl.decision.reason': 'a person decides' });
    const answer = span.events.find((e) => e.name === 'procctl.answer');
    expect(answer?.attributes).toEqual({ 'procctl.answer.kind': 'approval', 'procctl.answer': 'approve', 'procctl.answer.by': 'approver' });
    expect(span.events.map((e) => e.name)).toEqual(['procctl.decision', 'procctl.answer']);
    expect(span.attributes['procctl.status']).toBe('completed');

    const denied = await c.exec({ command: 'echo otlp-deny' });
    expect(denied.status).toBe('denied');
    const d2 = await spanOf(denied.sessionId);
    expect(d2.attributes['procctl.status']).toBe('denied');
    expect(d2.events.find((e) => e.name === 'procctl.decision')?.attributes).toMatchObject({ 'procctl.decision.action': 'deny', 'procctl.decision.rule': 1 });
  });

  it('sends the metrics: sessions by state, exec latency, approvals, denials, pending approvals and changes', async () => {
    const want = ['procctl.sessions', 'procctl.exec.duration', 'procctl.approvals', 'procctl.denials', 'procctl.approvals.pending', 'procctl.changes.pending'];
    const reading: ReceivedMetric[] = await waitFor(
      () => [...receiver.metrics].reverse().find((m) => want.every((n) => m.some((x) => x.name === n))),
      { timeoutMs: 30_000, what: 'a reading of the metrics with every instrument' },
    );
    const by = (name: string) => reading.find((m) => m.name === name)!;
    expect(by('procctl.sessions').points).toContainEqual({ attributes: { state: 'completed', scope: 'default' }, value: expect.any(Number) });
    expect(by('procctl.sessions').points).toContainEqual({ attributes: { state: 'denied', scope: 'default' }, value: 1 });
    expect(by('procctl.exec.duration').unit).toBe('s');
    expect(by('procctl.exec.duration').points[0].count).toBeGreaterThanOrEqual(3);
    expect(by('procctl.approvals').points).toContainEqual({ attributes: { answer: 'approve' }, value: 1 });
    expect(by('procctl.denials').points).toContainEqual({ attributes: { rule: '1' }, value: 1 });
    expect(by('procctl.approvals.pending').points).toEqual([{ attributes: {}, value: 0 }]);
    const t = await status();
    expect(t).toMatchObject({ endpoint: receiver.endpoint, sdk: true, dropped: 0 });
    expect(t.exported).toBeGreaterThanOrEqual(3);
    expect(t.metrics.exported).toBeGreaterThan(0);
  });

  it('with the receiver down, answers execs at once, drops and counts the spans; once it is back, sends again', async () => {
    await receiver.stop();
    const before = (await status()).dropped;
    for (let i = 0; i < 3; i++) {
      const t0 = Date.now();
      const r = await c.exec({ command: `echo otlp-down-${i}` });
      expect(r.status).toBe('completed');
      // Nothing waits for the receiver: a request costs what it costs without telemetry (loaded machines: generous).
      expect(Date.now() - t0).toBeLessThan(5000);
    }
    const down = await waitFor(async () => {
      const t = await status();
      return t.dropped > before && t.lastError !== null ? t : undefined;
    }, { timeoutMs: 60_000, everyMs: 200, what: 'daemon.status.telemetry.dropped to grow' });
    expect(down.lastError.signal).toMatch(/^(traces|metrics)$/);
    const shown = await procctl(d, ['status']);
    expect(shown.stdout).toMatch(new RegExp(`^otlp: +${receiver.endpoint.replace(/\./g, '\\.')}: \\d+ span\\(s\\) sent, [1-9]\\d* dropped; .*last failure`, 'm'));

    await receiver.restart();
    const exported = (await status()).exported;
    const back = await c.exec({ command: 'echo otlp-back' });
    await spanOf(back.sessionId);
    await waitFor(async () => (await status()).exported > exported, { what: 'exported to grow again' });
  });
});

describe('telemetry off (the default)', () => {
  let d: TestDaemon;
  let c: TestClient;
  beforeAll(async () => {
    d = await startDaemon();
    c = await d.client();
  });
  afterAll(async () => {
    c?.close();
    await d?.stop();
  });

  it('loads no part of the SDK and says so in daemon.status and procctl status', async () => {
    await c.exec({ command: 'echo quiet' });
    const t = (await c.call('daemon.status')).telemetry;
    expect(t).toEqual({ endpoint: null, sdk: false, exported: 0, dropped: 0, metrics: { exported: 0, dropped: 0 }, lastError: null });
    expect((await procctl(d, ['status'])).stdout).toMatch(/^otlp: +off \(telemetry\.otlp\.endpoint is not set\)$/m);
  });
});
