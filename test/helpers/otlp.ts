import { createRequire } from 'node:module';
import { createServer, type Server } from 'node:http';

/**
 * An OTLP/HTTP receiver for tests: it takes POST /v1/traces and /v1/metrics and decodes the
 * protobuf bodies with the OpenTelemetry protocol's own message definitions, as protobufjs
 * compiled them from opentelemetry-proto (the generated root that @opentelemetry/otlp-transformer
 * 0.215.0 ships, installed as `otlp-proto-root`) — not with the serializer of the SDK that sent
 * them. No OpenTelemetry Collector is packaged for this machine (docs/telemetry.md).
 */
const require = createRequire(import.meta.url);
// eslint-disable-next-line @typescript-eslint/no-explicit-any
const root = require('otlp-proto-root/build/src/generated/root.js') as any;
const proto = root.opentelemetry.proto;
const TO_OBJECT = { longs: String, enums: String, bytes: String, defaults: false, arrays: true };

/** An attribute list as a plain object: key → its value (string, number, boolean). */
export function attrs(list: { key: string; value: Record<string, unknown> }[] | undefined): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const { key, value } of list ?? []) {
    if ('stringValue' in value) out[key] = value.stringValue;
    else if ('intValue' in value) out[key] = Number(value.intValue);
    else if ('doubleValue' in value) out[key] = value.doubleValue;
    else if ('boolValue' in value) out[key] = value.boolValue;
    else out[key] = value;
  }
  return out;
}

export interface ReceivedSpan {
  name: string;
  attributes: Record<string, unknown>;
  events: { name: string; attributes: Record<string, unknown> }[];
  status?: { code?: string; message?: string };
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  resource: Record<string, unknown>;
}

export interface ReceivedMetric {
  name: string;
  unit?: string;
  /** The data points, each with its attributes and its value (gauge/sum: asInt or asDouble; histogram: count and sum). */
  points: { attributes: Record<string, unknown>; value?: number; count?: number; sum?: number }[];
}

export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = [];
  readonly metrics: ReceivedMetric[][] = [];
  /** Requests taken, by path; and the content types they came with. */
  readonly requests: { path: string; contentType: string }[] = [];
  private server: Server | undefined;

  private constructor(readonly port: number) {}

  /** Listen on 127.0.0.1, on `port` or a port the kernel picks. */
  static async start(port = 0): Promise<OtlpReceiver> {
    const r = new OtlpReceiver(port);
    await r.listen(port);
    return r;
  }

  get endpoint(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  private async listen(port: number): Promise<void> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const path = (req.url ?? '').split('?')[0];
        this.requests.push({ path, contentType: String(req.headers['content-type']) });
        const body = Buffer.concat(chunks);
        try {
          if (req.method === 'POST' && path === '/v1/traces') this.takeTraces(body);
          else if (req.method === 'POST' && path === '/v1/metrics') this.takeMetrics(body);
          else return void res.writeHead(404).end();
        } catch (err) {
          return void res.writeHead(400, { 'content-type': 'text/plain' }).end(String(err));
        }
        // An empty Export*ServiceResponse: every item accepted.
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.alloc(0));
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    (this as { port: number }).port = (server.address() as { port: number }).port;
    this.server = server;
  }

  private takeTraces(body: Buffer): void {
    const Req = proto.collector.trace.v1.ExportTraceServiceRequest;
    const msg = Req.toObject(Req.decode(body), TO_OBJECT);
    for (const rs of msg.resourceSpans ?? []) {
      const resource = attrs(rs.resource?.attributes);
      for (const ss of rs.scopeSpans ?? []) {
        for (const s of ss.spans ?? []) {
          this.spans.push({
            name: s.name,
            attributes: attrs(s.attributes),
            events: (s.events ?? []).map((e: { name: string; attributes?: [] }) => ({ name: e.name, attributes: attrs(e.attributes) })),
            status: s.status,
            startTimeUnixNano: s.startTimeUnixNano,
            endTimeUnixNano: s.endTimeUnixNano,
            resource,
          });
        }
      }
    }
  }

  private takeMetrics(body: Buffer): void {
    const Req = proto.collector.metrics.v1.ExportMetricsServiceRequest;
    const msg = Req.toObject(Req.decode(body), TO_OBJECT);
    const reading: ReceivedMetric[] = [];
    for (const rm of msg.resourceMetrics ?? []) {
      for (const sm of rm.scopeMetrics ?? []) {
        for (const m of sm.metrics ?? []) {
          const data = m.gauge ?? m.sum ?? m.histogram ?? {};
          reading.push({
            name: m.name,
            unit: m.unit,
            points: (data.dataPoints ?? []).map((p: Record<string, unknown>) => ({
              attributes: attrs(p.attributes as []),
              ...(p.asInt !== undefined ? { value: Number(p.asInt) } : p.asDouble !== undefined ? { value: Number(p.asDouble) } : {}),
              ...(p.count !== undefined ? { count: Number(p.count), sum: Number(p.sum ?? 0) } : {}),
            })),
          });
        }
      }
    }
    this.metrics.push(reading);
  }

  /** Stop listening and cut open connections: the port is then closed, as a receiver that went down. */
  async stop(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  /** Listen again on the same port: the receiver is back. */
  async restart(): Promise<void> {
    await this.listen(this.port);
  }
}
