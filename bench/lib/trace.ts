/**
 * What a slow request waited for, from a daemon's trace (src/base/trace.ts, `PROCCTL_TRACE_FILE`)
 * and the client's own send and receive times. Every time here is CLOCK_MONOTONIC in ms, the
 * clock the daemon's trace writes: the client's performance.now() plus `clientOffset`.
 */
import { readFileSync } from 'node:fs';
import { median } from './stats.js';
import { monotonicOffset } from '../../src/base/trace.js';

/** This process's performance.now() + clientOffset = the monotonic clock in ms. */
export const clientOffset = monotonicOffset();

interface TraceFile {
  methods: string[];
  kinds: string[];
  /** connection, id, read, parsed, written, method */
  requests: number[][];
  /** kind, begin, end */
  spans: number[][];
  full: { requests: boolean; spans: boolean };
}

/** A request as the client saw it: its id, when it was written and when its answer came (client's performance.now()). */
export interface Sent {
  id: number;
  sentAt: number;
  receivedMs: number;
}

/** Where one request's time went, ms. */
interface Phases {
  /** From the client's write to the daemon reading the line (the thread busy elsewhere, or not running). */
  wait: number;
  /** Reading to parsed. */
  parse: number;
  /** Parsed to the answer written: the handler and the answer's write. */
  handle: number;
  /** Written to the client having it all. */
  back: number;
  /** What else ran on the daemon's thread between the write and the answer: ms by kind. */
  overlaps: Map<string, number>;
}

export class DaemonTrace {
  private readonly byId = new Map<number, number[][]>();
  /** Spans sorted by begin, and the longest one (for the search window). */
  private readonly spans: number[][];
  private readonly longest: number;
  readonly kinds: string[];
  readonly full: TraceFile['full'];

  constructor(file: string) {
    const t = JSON.parse(readFileSync(file, 'utf8')) as TraceFile;
    for (const r of t.requests) {
      const list = this.byId.get(r[1]);
      if (list) list.push(r);
      else this.byId.set(r[1], [r]);
    }
    this.spans = t.spans.sort((a, b) => a[1] - b[1]);
    this.longest = this.spans.reduce((m, s) => Math.max(m, s[2] - s[1]), 0);
    this.kinds = t.kinds;
    this.full = t.full;
  }

  /** The phases of one request, or undefined when the trace does not have it. */
  phases(req: Sent): Phases | undefined {
    const sent = req.sentAt + clientOffset;
    const received = sent + req.receivedMs;
    const r = this.byId.get(req.id)?.find((x) => x[2] >= sent - 0.05 && x[2] <= received);
    if (!r) return undefined;
    const [, , read, parsed, written] = r;
    const overlaps = new Map<string, number>();
    for (let i = this.firstEndingAfter(sent); i < this.spans.length && this.spans[i][1] < written; i++) {
      const [kind, begin, end] = this.spans[i];
      const ms = Math.min(end, written) - Math.max(begin, sent);
      if (ms > 0) overlaps.set(this.kinds[kind], (overlaps.get(this.kinds[kind]) ?? 0) + ms);
    }
    return { wait: read - sent, parse: parsed - read, handle: written - parsed, back: received - written, overlaps };
  }

  private firstEndingAfter(t: number): number {
    // Spans begin in order; none is longer than `longest`, so none ending after t begins before t - longest.
    let lo = 0;
    let hi = this.spans.length;
    const from = t - this.longest;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.spans[mid][1] < from) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

/**
 * Why each request slower than `threshold` was slow, counted by cause: the other work that
 * overlapped it most (a sampler's turn, a watcher pass, a collection) when it held the request
 * past the typical request's phases; else the handler's own time, else waiting to run with the
 * thread idle (the scheduler, another process on the core), else the answer's way back.
 */
export function slowCauses(trace: DaemonTrace, all: Sent[], threshold: number): { slow: number; found: number; causes: [string, number][]; typical: string; slowPhases: string } {
  const phases = all.map((r) => trace.phases(r));
  const known = phases.filter((p): p is Phases => p !== undefined);
  const typ = {
    wait: median(known.map((p) => p.wait)),
    handle: median(known.map((p) => p.handle)),
    back: median(known.map((p) => p.back)),
  };
  const causes = new Map<string, number>();
  const slowOnes: Phases[] = [];
  let slow = 0;
  all.forEach((r, i) => {
    if (r.receivedMs <= threshold) return;
    slow++;
    const p = phases[i];
    if (!p) return;
    slowOnes.push(p);
    const excess = r.receivedMs - (typ.wait + p.parse + typ.handle + typ.back);
    let cause: string;
    const [kind, ms] = [...p.overlaps].sort((a, b) => b[1] - a[1])[0] ?? ['', 0];
    if (ms >= Math.max(0.02, excess / 3)) cause = kind;
    else if (p.handle - typ.handle >= Math.max(p.wait - typ.wait, p.back - typ.back)) cause = 'the handler itself (nothing else on the thread)';
    else if (p.wait - typ.wait >= p.back - typ.back) cause = 'waiting to be read, the thread idle (not scheduled, or an untraced callback)';
    else cause = 'the answer on its way back (the client not scheduled)';
    causes.set(cause, (causes.get(cause) ?? 0) + 1);
  });
  const f = (x: number) => x.toFixed(3);
  const med = (k: 'wait' | 'handle' | 'back') => f(median(slowOnes.map((p) => p[k])));
  return {
    slow,
    found: slowOnes.length,
    causes: [...causes].sort((a, b) => b[1] - a[1]),
    typical: `send->read ${f(typ.wait)}, handler ${f(typ.handle)}, write->received ${f(typ.back)} ms`,
    slowPhases: slowOnes.length ? `send->read ${med('wait')}, handler ${med('handle')}, write->received ${med('back')} ms` : '-',
  };
}

/**
 * What the requests met on the daemon's thread between their write and their answer, whatever
 * their latency: per kind of work, how many met it and the median time it overlapped them. Less
 * moved by the machine's load than the slow ones' causes (the client's side is left out).
 */
export function metOnThread(trace: DaemonTrace, all: Sent[]): [string, number, number][] {
  const met = new Map<string, number[]>();
  for (const r of all) {
    for (const [kind, ms] of trace.phases(r)?.overlaps ?? []) {
      const list = met.get(kind);
      if (list) list.push(ms);
      else met.set(kind, [ms]);
    }
  }
  return [...met].map(([kind, ms]): [string, number, number] => [kind, ms.length, median(ms)]).sort((a, b) => b[1] - a[1]);
}
