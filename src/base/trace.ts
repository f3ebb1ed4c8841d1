import { writeFileSync } from 'node:fs';
import { constants, PerformanceObserver } from 'node:perf_hooks';

/**
 * A trace of the daemon's thread for the benches (bench/tails.ts): when each request's bytes were
 * read, parsed and answered, and what else held the thread (the samplers' turns, the input
 * watcher's passes, garbage collections). On only with `PROCCTL_TRACE_FILE=PATH` in the daemon's
 * environment, which it writes at exit; off, `trace` is undefined and each place that notes
 * something is one `trace?.` on it: nothing is timed, made or kept.
 *
 * Times are CLOCK_MONOTONIC in ms, the clock `process.hrtime` reads in every process on the
 * machine, so a client's send and receive line up with the daemon's read and write.
 */
export class Trace {
  /** Per request: connection, id, read, parsed, answered, method (an index into `methods`). */
  private readonly requests: Float64Array;
  private nRequests = 0;
  /** Per span of other work: kind (an index into `kinds`), begin, end. */
  private readonly spans: Float64Array;
  private nSpans = 0;
  private readonly methods: string[] = [];
  private readonly kinds: string[] = [];
  private readonly methodIndex = new Map<string, number>();
  private readonly kindIndex = new Map<string, number>();
  private connections = 0;
  /** performance.now() + offset = the monotonic clock in ms. */
  private readonly offset = monotonicOffset();
  private readonly gc: PerformanceObserver;

  constructor(
    private readonly file: string,
    private readonly maxRequests = 500_000,
    private readonly maxSpans = 2_000_000,
  ) {
    this.requests = new Float64Array(maxRequests * 6);
    this.spans = new Float64Array(maxSpans * 3);
    this.gc = new PerformanceObserver((list) => {
      for (const e of list.getEntries()) this.span(`gc ${gcKind((e as { detail?: { kind?: number } }).detail?.kind)}`, e.startTime, e.startTime + e.duration);
    });
    this.gc.observe({ entryTypes: ['gc'] });
    process.on('exit', () => this.write());
  }

  /** A number for a new connection, to tell its request ids from another's. */
  connection(): number {
    return ++this.connections;
  }

  /** A request answered: its connection, id, when its line was read and parsed, when the answer was written. */
  request(connection: number, id: unknown, method: string, readAt: number, parsedAt: number, writtenAt: number): void {
    if (typeof id !== 'number' || this.nRequests === this.maxRequests) return;
    const o = this.nRequests++ * 6;
    const r = this.requests;
    r[o] = connection;
    r[o + 1] = id;
    r[o + 2] = readAt;
    r[o + 3] = parsedAt;
    r[o + 4] = writtenAt;
    r[o + 5] = index(method, this.methods, this.methodIndex);
  }

  /** Other work on the thread, from `begin` to `end` (performance.now()). */
  span(kind: string, begin: number, end: number): void {
    if (this.nSpans === this.maxSpans) return;
    const o = this.nSpans++ * 3;
    this.spans[o] = index(kind, this.kinds, this.kindIndex);
    this.spans[o + 1] = begin;
    this.spans[o + 2] = end;
  }

  /** The trace as JSON: times on the monotonic clock, in ms. */
  write(): void {
    this.gc.disconnect();
    const at = (t: number) => Math.round((t + this.offset) * 1000) / 1000;
    const requests: number[][] = [];
    for (let i = 0; i < this.nRequests; i++) {
      const r = this.requests.subarray(i * 6, i * 6 + 6);
      requests.push([r[0], r[1], at(r[2]), at(r[3]), at(r[4]), r[5]]);
    }
    const spans: number[][] = [];
    for (let i = 0; i < this.nSpans; i++) {
      const s = this.spans.subarray(i * 3, i * 3 + 3);
      spans.push([s[0], at(s[1]), at(s[2])]);
    }
    writeFileSync(this.file, JSON.stringify({ methods: this.methods, kinds: this.kinds, requests, spans, full: { requests: this.nRequests === this.maxRequests, spans: this.nSpans === this.maxSpans } }));
  }
}

/**
 * What to add to performance.now() for CLOCK_MONOTONIC in ms (process.hrtime's clock). Read
 * after both clocks were read once (the first performance.now() loads its module: 3 ms late), the
 * closest bracket of five.
 */
export function monotonicOffset(): number {
  performance.now();
  process.hrtime.bigint();
  let best = Infinity;
  let offset = 0;
  for (let i = 0; i < 5; i++) {
    const before = performance.now();
    const hr = Number(process.hrtime.bigint()) / 1e6;
    const after = performance.now();
    if (after - before < best) {
      best = after - before;
      offset = hr - (before + after) / 2;
    }
  }
  return offset;
}

/** A name's number in `names`, given it on first sight. */
function index(name: string, names: string[], numbers: Map<string, number>): number {
  let i = numbers.get(name);
  if (i === undefined) {
    i = names.push(name) - 1;
    numbers.set(name, i);
  }
  return i;
}

/** The kind of a perf_hooks gc entry. */
function gcKind(kind: number | undefined): string {
  if (kind === constants.NODE_PERFORMANCE_GC_MINOR) return 'young';
  if (kind === constants.NODE_PERFORMANCE_GC_MAJOR) return 'full';
  if (kind === constants.NODE_PERFORMANCE_GC_INCREMENTAL) return 'incremental';
  if (kind === constants.NODE_PERFORMANCE_GC_WEAKCB) return 'weak callbacks';
  return `kind ${kind}`;
}

/** The daemon's trace, when `PROCCTL_TRACE_FILE` names where to write it; else undefined (and free). */
export const trace: Trace | undefined = process.env.PROCCTL_TRACE_FILE ? new Trace(process.env.PROCCTL_TRACE_FILE) : undefined;
