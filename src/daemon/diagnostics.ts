import { readdirSync, statSync } from 'node:fs';
import { Socket } from 'node:net';
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { queryObjects } from 'node:v8';
import { Session } from '../session/session.js';
import { SessionOutput } from '../session/output.js';
import { Spool } from '../session/spool.js';
import { invalid } from '../base/errors.js';
import { probes } from '../readiness/probes.js';

/** The classes whose live instances say whether a forgotten session left anything behind. */
const TRACKED = { Session, SessionOutput, Spool, Socket } as const;

export interface Diagnostics {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  /** Open descriptors of the daemon process. */
  fds: number;
  /** Live handles and requests of the event loop, by kind (Timeout, PipeWrap, FSReqCallback, …). */
  resources: Record<string, number>;
  /** Live instances of the tracked classes, counted after a full garbage collection; only with `objects: true`. */
  objects?: Record<keyof typeof TRACKED, number>;
  /** How late the event loop ran a 10 ms timer since the previous call; null on the first call, and the first after WATCH_UNREAD_MS without one (it starts the watch). */
  eventLoopDelay: LoopDelay | null;
  /** Readiness probes (a `waitFor` port, URL or file) still being tried: only those of running sessions not yet ready. */
  readinessProbes: number;
}

/** Event-loop delay in ms: how long past its due time a timer ran, sampled every RESOLUTION_MS. */
export interface LoopDelay {
  p50: number;
  p99: number;
  max: number;
  /** Samples taken. */
  count: number;
  /** Over this long, in ms: since the previous call. */
  sinceMs: number;
}

/** A finer timer costs idle CPU (about 0.5% of a core at 10 ms on a 2-core VM, 2.5% at 1 ms). */
const RESOLUTION_MS = 10;
/**
 * A watch nobody has read for this long stops: its timer wakes the daemon's thread a hundred times
 * a second, and one look by an operator would otherwise keep it doing so for the daemon's life. A
 * monitor asking every few minutes keeps it; the first call after a gap starts it again.
 */
export const WATCH_UNREAD_MS = 15 * 60_000;
let loop: { histogram: IntervalHistogram; since: number; unread: NodeJS.Timeout } | undefined;

/**
 * Read and restart the loop-delay watch. It starts on the first call, so a daemon nobody
 * diagnoses pays nothing. Restarted after this call's own garbage collection, so that pause is
 * in no answer: the histogram drops the interval in progress when reset.
 */
function loopDelay(): LoopDelay | null {
  const now = performance.now();
  if (!loop) {
    const histogram = monitorEventLoopDelay({ resolution: RESOLUTION_MS });
    histogram.enable();
    const unread = setTimeout(stopLoopDelay, WATCH_UNREAD_MS);
    unread.unref();
    loop = { histogram, since: now, unread };
    return null;
  }
  loop.unread.refresh();
  const h = loop.histogram;
  // Each sample is the interval between two runs of the timer: the resolution plus the delay.
  const ms = (ns: number) => (h.count === 0 ? 0 : Math.max(0, Math.round((ns / 1e6 - RESOLUTION_MS) * 1000) / 1000));
  const out = { p50: ms(h.percentile(50)), p99: ms(h.percentile(99)), max: ms(h.max), count: h.count, sinceMs: Math.round(now - loop.since) };
  return out;
}

function restartLoopDelay(): void {
  if (!loop) return;
  loop.histogram.reset();
  loop.since = performance.now();
}

/** The watch's timer off, until the next call starts it again. */
function stopLoopDelay(): void {
  if (!loop) return;
  loop.histogram.disable();
  clearTimeout(loop.unread);
  loop = undefined;
}

function openDescriptors(): number {
  try {
    // Linux 6.2 and newer give the count as the directory's size: listing a few thousand names
    // (a daemon with 1,000 sessions) took 3-20 ms of the loop on a busy machine.
    const size = statSync('/proc/self/fd').size;
    if (size > 0) return size;
    return readdirSync('/proc/self/fd').length - 1; // less the one readdir itself opened
  } catch {
    return -1;
  }
}

function countBy(names: string[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (const n of names) out[n] = (out[n] ?? 0) + 1;
  return out;
}

let warned = false;

/** What a caller asks of `diagnostics`. */
export interface DiagnosticsParams {
  /**
   * Count live objects: only when asked for by name. Each class counted is a full garbage
   * collection on the daemon's thread (V8 counts a heap only from there): with a thousand
   * sessions held, about half a second in all, during which nothing is answered.
   */
  objects?: boolean;
}

/** The params of `daemon.diagnostics`, checked: `{}` or `{objects: boolean}`. */
export function diagnosticsParams(params: unknown): DiagnosticsParams {
  const p = (params ?? {}) as Record<string, unknown>;
  const unknown = Object.keys(p).find((k) => k !== 'objects');
  if (unknown !== undefined) throw invalid(`invalid daemon.diagnostics params: unknown parameter "${unknown}"; the only one is objects (boolean)`, { path: [unknown], schema: true });
  if (p.objects !== undefined && typeof p.objects !== 'boolean') throw invalid('daemon.diagnostics: objects must be true or false (true adds the object counts, and their full garbage collections)', { path: ['objects'], schema: true });
  return { objects: p.objects as boolean | undefined };
}

/**
 * What the daemon holds now, for operators and the leak tests: memory, descriptors, handles and
 * event-loop delay, cheap enough to poll. The object counts (`objects: true`) run a full garbage
 * collection per class first and hold the daemon while they do: asked for by name, now and then.
 */
export function diagnostics(params: DiagnosticsParams = {}): Diagnostics {
  const countObjects = params.objects === true;
  if (countObjects && !warned) {
    warned = true;
    // queryObjects is marked experimental; its one-time warning would land on the daemon's stderr.
    const emit = process.emitWarning;
    process.emitWarning = () => undefined;
    try {
      queryObjects(Session, { format: 'count' });
    } finally {
      process.emitWarning = emit;
    }
  }
  const eventLoopDelay = loopDelay();
  let objects: Diagnostics['objects'];
  if (countObjects) {
    objects = {} as NonNullable<Diagnostics['objects']>;
    for (const [name, ctor] of Object.entries(TRACKED)) objects[name as keyof typeof TRACKED] = queryObjects(ctor, { format: 'count' }) as number;
  }
  const mem = process.memoryUsage();
  const out: Diagnostics = {
    rss: mem.rss,
    heapUsed: mem.heapUsed,
    external: mem.external,
    arrayBuffers: mem.arrayBuffers,
    fds: openDescriptors(),
    resources: countBy(process.getActiveResourcesInfo()),
    ...(objects ? { objects } : {}),
    eventLoopDelay,
    readinessProbes: probes.size,
  };
  restartLoopDelay();
  return out;
}
