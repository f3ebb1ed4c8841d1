import type { Context } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import type { PushMetricExporter, ResourceMetrics } from '@opentelemetry/sdk-metrics';
import type { ReadableSpan, Span, SpanExporter, SpanProcessor } from '@opentelemetry/sdk-trace';
import type { Logger } from 'pino';

// Every span and reading either reaches the receiver or is counted as dropped (SPEC §18): the
// SDK's exporters are wrapped so each result is counted, and spans past the queue's bound are
// refused here, counted, before the batch processor would drop them silently.

/** The last export that failed: when, which signal, and why. */
export interface ExportError {
  at: string;
  signal: 'traces' | 'metrics';
  message: string;
}

export class ExportCounts {
  exported = 0;
  dropped = 0;
  readonly metrics = { exported: 0, dropped: 0 };
  lastError: ExportError | null = null;
  /** Spans handed to the batch processor and not yet exported or dropped. */
  inFlight = 0;
  private failing = false;

  constructor(private readonly log: Logger) {}

  /** One export's result: counted, and a change between working and failing said once in the log. */
  settle(signal: 'traces' | 'metrics', n: number, result: ExportResult): void {
    const ok = result.code === ExportResultCode.SUCCESS;
    const tally = signal === 'traces' ? this : this.metrics;
    if (ok) tally.exported += n;
    else tally.dropped += n;
    if (!ok) {
      const message = result.error?.message || 'the export failed';
      this.lastError = { at: new Date().toISOString(), signal, message };
      if (!this.failing) this.log.warn({ signal, err: message }, 'OpenTelemetry export failed: spans and readings are dropped and counted (daemon.status.telemetry) until the receiver takes them again');
    } else if (this.failing) {
      this.log.info({ signal }, 'OpenTelemetry export works again');
    }
    this.failing = !ok;
  }
}

/** The trace exporter, counted; the processor's in-flight count goes down as each batch settles. */
export class CountingSpanExporter implements SpanExporter {
  constructor(private readonly inner: SpanExporter, private readonly counts: ExportCounts) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    this.inner.export(spans, (result) => {
      this.counts.inFlight -= spans.length;
      this.counts.settle('traces', spans.length, result);
      done(result);
    });
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

/** The batch processor behind a bound: a span past `max` waiting is dropped and counted here. */
export class BoundedSpanProcessor implements SpanProcessor {
  constructor(private readonly inner: SpanProcessor, private readonly counts: ExportCounts, private readonly max: number) {}

  onStart(span: Span, parent: Context): void {
    this.inner.onStart(span, parent);
  }

  onEnd(span: ReadableSpan): void {
    if (this.counts.inFlight >= this.max) {
      this.counts.dropped++;
      return;
    }
    this.counts.inFlight++;
    this.inner.onEnd(span);
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}

/** The metric exporter, counted by readings; it keeps the inner one's choice of temporality. */
export class CountingMetricExporter implements PushMetricExporter {
  readonly selectAggregationTemporality: PushMetricExporter['selectAggregationTemporality'];
  readonly selectAggregation: PushMetricExporter['selectAggregation'];

  constructor(private readonly inner: PushMetricExporter, private readonly counts: ExportCounts) {
    this.selectAggregationTemporality = inner.selectAggregationTemporality?.bind(inner);
    this.selectAggregation = inner.selectAggregation?.bind(inner);
  }

  export(metrics: ResourceMetrics, done: (result: ExportResult) => void): void {
    this.inner.export(metrics, (result) => {
      this.counts.settle('metrics', 1, result);
      done(result);
    });
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush();
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }
}
