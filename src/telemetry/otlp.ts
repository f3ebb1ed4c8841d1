import { OTLPMetricExporter } from '@opentelemetry/exporter-metrics-otlp-proto';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { resourceFromAttributes } from '@opentelemetry/resources';
import { MeterProvider, PeriodicExportingMetricReader } from '@opentelemetry/sdk-metrics';
import { BatchSpanProcessor, TracerProvider } from '@opentelemetry/sdk-trace';
import { hostname } from 'node:os';
import type { Logger } from 'pino';
import type { AuditBus } from '../audit/events.js';
import { otlpSignalUrl, type Config } from '../config/schema.js';
import type { Registry } from '../session/registry.js';
import { BoundedSpanProcessor, CountingMetricExporter, CountingSpanExporter, ExportCounts, type ExportError } from './counting.js';
import { Instruments } from './instruments.js';
import { SessionSpans } from './spans.js';

/** Spans waiting to be sent at most; past it a span is dropped and counted. */
const MAX_QUEUE = 2048;
/** One export's bound, retries included: a receiver that does not answer costs this, off the request's path. */
const EXPORT_TIMEOUT_MS = 10_000;
/** What a shutdown waits for the last batch before it goes without it. */
const SHUTDOWN_WAIT_MS = 3000;

/**
 * OpenTelemetry export (SPEC §18, docs/telemetry.md), loaded by the daemon with import() only
 * when `telemetry.otlp.endpoint` is set: sessions as spans and the metrics, over OTLP/HTTP with
 * protobuf bodies, batched on a timer. Nothing here runs on a request's path but putting an
 * event on a span; a receiver that is down costs dropped, counted spans, never a wait.
 */
export class OtlpTelemetry {
  private readonly counts: ExportCounts;
  private readonly tracing: TracerProvider;
  private readonly metering: MeterProvider;
  private readonly spans: SessionSpans;
  private readonly unlisten: () => void;

  constructor(private readonly otlp: Config['telemetry']['otlp'] & { endpoint: string }, sessions: Registry, bus: AuditBus, version: string, log: Logger) {
    this.counts = new ExportCounts(log);
    const resource = resourceFromAttributes({ 'service.name': 'procctld', 'service.version': version, 'host.name': hostname(), 'process.pid': process.pid });
    const exporter = { headers: otlp.headers, timeoutMillis: EXPORT_TIMEOUT_MS };
    const spanExporter = new CountingSpanExporter(new OTLPTraceExporter({ ...exporter, url: otlpSignalUrl(otlp.endpoint, 'traces') }), this.counts);
    const batch = new BatchSpanProcessor({
      exporter: spanExporter,
      maxQueueSize: MAX_QUEUE,
      maxExportBatchSize: 512,
      scheduledDelayMillis: otlp.intervalMs,
      exportTimeoutMillis: EXPORT_TIMEOUT_MS + 5000,
    });
    this.tracing = new TracerProvider({
      resource,
      spanProcessors: [new BoundedSpanProcessor(batch, this.counts, MAX_QUEUE)],
      spanLimits: { attributeValueLengthLimit: 4096, eventCountLimit: 128 },
    });
    const metricExporter = new CountingMetricExporter(new OTLPMetricExporter({ ...exporter, url: otlpSignalUrl(otlp.endpoint, 'metrics') }), this.counts);
    this.metering = new MeterProvider({
      resource,
      readers: [
        new PeriodicExportingMetricReader({
          exporter: metricExporter,
          exportIntervalMillis: otlp.intervalMs,
          exportTimeoutMillis: Math.min(otlp.intervalMs, EXPORT_TIMEOUT_MS),
        }),
      ],
    });
    this.spans = new SessionSpans(this.tracing.getTracer('procctld', version), () => this.counts.dropped++);
    const instruments = new Instruments(this.metering.getMeter('procctld', version), sessions);
    this.unlisten = bus.listen((e) => {
      this.spans.take(e);
      instruments.take(e);
    });
    log.info({ endpoint: otlp.endpoint, intervalMs: otlp.intervalMs }, 'sending sessions as spans and the metrics over OTLP/HTTP');
  }

  /** What daemon.status.telemetry says (tools/context.ts, TelemetryStatus). */
  status(): { endpoint: string; sdk: true; exported: number; dropped: number; metrics: { exported: number; dropped: number }; lastError: ExportError | null } {
    const c = this.counts;
    return { endpoint: this.otlp.endpoint, sdk: true, exported: c.exported, dropped: c.dropped, metrics: { ...c.metrics }, lastError: c.lastError };
  }

  /** Send what is still open and waiting, for a few seconds at most: a receiver that is down does not hold the shutdown. */
  async shutdown(): Promise<void> {
    this.unlisten();
    this.spans.endAll();
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([this.tracing.shutdown(), this.metering.shutdown()]),
      new Promise((resolve) => (timer = setTimeout(resolve, SHUTDOWN_WAIT_MS))),
    ]);
    clearTimeout(timer);
  }
}
