import { SpanKind, SpanStatusCode, type Attributes, type Span, type Tracer } from '@opentelemetry/api';
import type { AuditEvent } from '../audit/events.js';

/** Spans open at once; a session past this many is not traced (counted as dropped). */
const MAX_OPEN = 10_000;

/**
 * Each session as one span, `procctl.exec`, from its request to its end (SPEC §18,
 * docs/telemetry.md), made from the same events the audit trail is written from: the start
 * opens it, the rules' decision, a person's answer, network refusals and changes are its
 * events, the end sets how it ended and closes it.
 */
export class SessionSpans {
  private readonly open = new Map<string, Span>();

  constructor(private readonly tracer: Tracer, private readonly onDropped: () => void) {}

  take(e: AuditEvent): void {
    switch (e.type) {
      case 'session': {
        // One span a session: a session is started once, whatever resumes it later.
        if (this.open.has(e.sessionId)) return;
        if (this.open.size >= MAX_OPEN) return this.onDropped();
        const span = this.tracer.startSpan('procctl.exec', {
          kind: SpanKind.INTERNAL,
          attributes: {
            'procctl.session.id': e.sessionId,
            'procctl.scope': e.scope,
            'procctl.command': e.command,
            'procctl.workdir': e.workdir,
            'procctl.sandbox': e.sandbox,
            'procctl.network': typeof e.network === 'string' ? e.network : JSON.stringify(e.network),
            'procctl.changes': e.changes,
            'procctl.elevated': e.elevated,
            'procctl.client.kind': e.client.kind,
            ...(e.client.name !== undefined ? { 'procctl.client.name': e.client.name } : {}),
            ...(e.peer?.uid != null ? { 'procctl.peer.uid': e.peer.uid } : {}),
            ...(e.peer?.pid != null ? { 'procctl.peer.pid': e.peer.pid } : {}),
            ...(e.peer?.exe != null ? { 'procctl.peer.exe': e.peer.exe } : {}),
            'host.name': e.host,
          },
        });
        this.open.set(e.sessionId, span);
        return;
      }
      case 'decision':
        return this.event(e.sessionId, 'procctl.decision', {
          'procctl.decision.action': e.action,
          'procctl.decision.part': e.part,
          ...(e.rule !== null ? { 'procctl.decision.rule': e.rule } : {}),
          'procctl.decision.reason': e.reason,
        });
      case 'answer':
        return this.event(e.sessionId, 'procctl.answer', { 'procctl.answer.kind': e.kind, 'procctl.answer': e.answer, 'procctl.answer.by': e.by });
      case 'network_refused':
        // The first refusal of each host, when it happened; the end's totals follow as network_denied.
        if (!e.first) return;
        return this.event(e.sessionId, 'procctl.network_refused', { 'procctl.network_refused.host': e.host, 'procctl.network_refused.reason': e.reason });
      case 'network_denied':
        return this.event(e.sessionId, 'procctl.network_denied', { 'procctl.network_denied.host': e.host, 'procctl.network_denied.count': e.count });
      case 'changes':
        return this.event(e.sessionId, 'procctl.changes', {
          'procctl.changes.action': e.action,
          'procctl.changes.files': e.files,
          ...(e.conflicts !== undefined ? { 'procctl.changes.conflicts': e.conflicts } : {}),
          ...(e.refused !== undefined ? { 'procctl.changes.refused': e.refused } : {}),
          ...(e.failed !== undefined ? { 'procctl.changes.failed': e.failed } : {}),
        });
      case 'end':
        return this.end(e);
    }
  }

  private event(sessionId: string, name: string, attributes: Attributes): void {
    this.open.get(sessionId)?.addEvent(name, attributes);
  }

  private end(e: Extract<AuditEvent, { type: 'end' }>): void {
    let span = this.open.get(e.sessionId);
    this.open.delete(e.sessionId);
    // A session this daemon did not see start (it ran before a restart): its span starts when it did.
    span ??= this.tracer.startSpan('procctl.exec', {
      kind: SpanKind.INTERNAL,
      startTime: Date.now() - e.runtimeMs,
      attributes: { 'procctl.session.id': e.sessionId, 'procctl.scope': e.scope },
    });
    span.setAttributes({
      'procctl.status': e.status,
      ...(e.exit !== null ? { 'procctl.exit_code': e.exit } : {}),
      ...(e.signal !== null ? { 'procctl.signal': e.signal } : {}),
      ...(e.reason !== null ? { 'procctl.reason': e.reason } : {}),
      'procctl.runtime_ms': e.runtimeMs,
      'procctl.output_bytes': e.outputBytes,
      ...(e.resources
        ? {
            'procctl.resources.cpu_ms': e.resources.cpuMs,
            'procctl.resources.memory_peak_bytes': e.resources.memoryPeakBytes,
            'procctl.resources.processes': e.resources.processes,
          }
        : {}),
    });
    // A job that failed to run (killed, timed out, not found, lost) is an error; an exit code is the job's own answer.
    if (e.status === 'failed') span.setStatus({ code: SpanStatusCode.ERROR, message: e.reason ?? 'failed' });
    span.end();
  }

  /** At shutdown: what is still open (a question nobody answered yet) is sent as it stands. */
  endAll(): void {
    for (const span of this.open.values()) span.setAttribute('procctl.open_at_shutdown', true).end();
    this.open.clear();
  }
}
