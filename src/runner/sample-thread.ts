import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { UsagePlan, UsageReading } from '../cgroup/session.js';
import type { PortsPlan, PortsReading, Table } from './ports-read.js';

/**
 * What the daemon asks the sampling thread: read the keys `ids`, in that order. Each key's plan
 * (plain paths and pids) is sent once, with the first batch that has it (`plans`); a key left out
 * of a batch is forgotten there, and sent again if it comes back. `forget`: ports keys whose last
 * look the thread must not trust (one was made on the daemon's thread since): read in full.
 */
export type ToSampleThread =
  | { id: number; kind: 'usage'; ids: Int32Array; plans: [number, UsagePlan][] }
  | { id: number; kind: 'ports'; ids: Int32Array; plans: [number, PortsPlan][]; forget: number[] };

/** Per usage key, these figures in a row (NaN: none; cpuMs NaN: the read failed). */
export const USAGE_FIELDS = 5;

const orNaN = (n: number | undefined) => (n === undefined ? NaN : n);
const orNone = (n: number) => (Number.isNaN(n) ? undefined : n);

/** Write the `i`th key's reading into a usage answer's row (the thread's side). */
export function putUsage(figures: Float64Array, i: number, r: UsageReading): void {
  const o = i * USAGE_FIELDS;
  figures[o] = r.cpuMs;
  figures[o + 1] = r.memoryBytes;
  figures[o + 2] = orNaN(r.memoryPeakBytes);
  figures[o + 3] = orNaN(r.processes);
  figures[o + 4] = orNaN(r.counted);
}

/** Read the `i`th key's row of a usage answer into `into` (the daemon's side): false when the thread could not read it. */
export function usageAt(figures: Float64Array, i: number, into: UsageReading): boolean {
  const o = i * USAGE_FIELDS;
  if (Number.isNaN(figures[o])) return false;
  into.cpuMs = figures[o];
  into.memoryBytes = figures[o + 1];
  into.memoryPeakBytes = orNone(figures[o + 2]);
  into.processes = orNone(figures[o + 3]);
  into.counted = orNone(figures[o + 4]);
  return true;
}

/**
 * What it answers, with the thread's CPU time for the batch. Usage: USAGE_FIELDS numbers a key
 * (cpuMs, memoryBytes, memoryPeakBytes, processes, counted), a buffer handed over, not copied.
 * Ports: only the keys whose look read their descriptors (by index in the batch); the others'
 * processes and namespaces' growth were those of their last look (the daemon keeps what that
 * found, less what closed: `tables` says what listens now).
 */
export type FromSampleThread =
  | { kind: 'ready'; priority: SamplePriority }
  | { id: number; kind: 'usage'; figures: Float64Array; cpuMs: number }
  | { id: number; kind: 'ports'; looked: [number, PortsReading][]; tables: Map<string, Table>; cpuMs: number };

/** The priority the thread got: SCHED_IDLE (the addon's idleThread), else nice 19, else none it could set. */
export type SamplePriority = 'idle' | 'nice 19' | 'normal';

const WORKER = new URL('./sample-worker.js', import.meta.url);

type Answer<K extends 'usage' | 'ports'> = Extract<FromSampleThread, { kind: K }>;

/**
 * The samplers' thread (sample-worker.ts): the periodic refreshes of the usage and ports samplers
 * (runner/cgroup.ts, runner/ports.ts) read every held session's files there, a batch a refresh,
 * and the daemon's thread only makes the samples from what comes back, in one turn. At a thousand
 * sessions those reads took 3.5-5% of the daemon's thread in 0.1 ms turns that 2-4% of requests
 * met; the thread runs at the lowest priority the kernel gives without privileges (SCHED_IDLE,
 * else nice 19), so a request preempts it at once. It gets paths and pids, never a session, each
 * sample's once (runner/usage.ts numbers them): a batch is a list of numbers, and its answer
 * numbers (usage) or the few looks that read descriptors (ports), so the daemon's part stays small.
 *
 * Started at the first refresh and kept (unreferenced: the daemon's exit does not wait for it; an
 * exec of a new image ends it with every other thread). Where it cannot start (the sources run as
 * they are, no build) or once it died, `read` answers undefined and the samplers read on the
 * daemon's thread as before; a death is said once on stderr.
 */
export class SampleThread {
  private worker: Worker | undefined;
  private failed = false;
  private next = 1;
  private readonly waiting = new Map<number, { resolve: (m: FromSampleThread) => void; reject: (e: Error) => void }>();
  /** Ports keys to be read in full at the next batch. */
  private forget: number[] = [];
  /** The priority the thread said it got (undefined until it said). */
  priority: SamplePriority | undefined;
  /**
   * Whether the thread lowers its priority (SCHED_IDLE, else nice 19) when it starts: by default
   * yes. Its answers are posted under the message port's lock, which the main thread, woken by
   * them, may then wait for; where jobs share the daemon's CPU group (no cpu controller for
   * sessions) a low-priority thread may wait long for the core, and the main thread with it. The
   * daemon says no there (runner/helper-priority.ts).
   */
  lowPriority = true;

  /** Whether the thread's code is there (a build; not when the sources run as they are, e.g. under a test runner). */
  static available(): boolean {
    return WORKER.protocol === 'file:' && existsSync(fileURLToPath(WORKER));
  }

  /**
   * Read the usage of the samples numbered `ids` there; `fresh`, the indexes of those never sent,
   * whose plans `planOf` gives. Undefined when there is no thread to read them.
   */
  usage(ids: Int32Array, fresh: number[], planOf: (index: number) => UsagePlan): Promise<Answer<'usage'>> | undefined {
    if (!this.start()) return undefined;
    const plans = fresh.map((i): [number, UsagePlan] => [ids[i], planOf(i)]);
    return this.ask({ id: 0, kind: 'usage', ids, plans }) as Promise<Answer<'usage'>> | undefined;
  }

  /** Look at the ports of the samples numbered `ids` there (as `usage`); undefined when there is no thread to read them. */
  ports(ids: Int32Array, fresh: number[], planOf: (index: number) => PortsPlan): Promise<Answer<'ports'>> | undefined {
    if (!this.start()) return undefined;
    const plans = fresh.map((i): [number, PortsPlan] => [ids[i], planOf(i)]);
    const forget = this.forget;
    this.forget = [];
    return this.ask({ id: 0, kind: 'ports', ids, plans, forget }) as Promise<Answer<'ports'>> | undefined;
  }

  /** The next ports batch reads sample `id`'s descriptors whatever its last look there found (a look here came between). */
  lookAgain(id: number): void {
    this.forget.push(id);
  }

  /** End the thread (daemon shutdown); reads go on here if asked again. */
  close(): void {
    const worker = this.worker;
    this.worker = undefined;
    this.failed = true;
    this.rejectAll(new Error('the sampling thread was closed'));
    void worker?.terminate();
  }

  private ask(m: ToSampleThread): Promise<FromSampleThread> | undefined {
    const worker = this.worker;
    if (!worker) return undefined;
    const id = this.next++;
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve, reject });
      try {
        worker.postMessage({ ...m, id });
      } catch (err) {
        this.waiting.delete(id);
        reject(err as Error);
      }
    });
  }

  private start(): Worker | undefined {
    if (this.worker || this.failed) return this.worker;
    if (!SampleThread.available()) {
      this.failed = true;
      return undefined;
    }
    let worker: Worker;
    try {
      // Without the bench's trace file: a trace of the thread would be written over the daemon's at its end.
      const env = { ...process.env };
      delete env.PROCCTL_TRACE_FILE;
      worker = new Worker(WORKER, { name: 'procctl-sampler', env, workerData: { lowPriority: this.lowPriority }, resourceLimits: { maxOldGenerationSizeMb: 64 } });
    } catch (err) {
      this.fail(`cannot start (${(err as Error).message})`);
      return undefined;
    }
    worker.unref();
    worker.on('message', (m: FromSampleThread) => {
      if (m.kind === 'ready') {
        this.priority = m.priority;
        return;
      }
      const w = this.waiting.get(m.id);
      this.waiting.delete(m.id);
      w?.resolve(m);
    });
    worker.on('error', (err) => this.gone(worker, `failed (${err.message})`));
    worker.on('exit', (code) => this.gone(worker, `ended (exit ${code})`));
    this.worker = worker;
    return worker;
  }

  private gone(worker: Worker, why: string): void {
    if (this.worker !== worker) return;
    this.worker = undefined;
    this.fail(why);
    this.rejectAll(new Error(`the sampling thread ${why}`));
  }

  private fail(why: string): void {
    if (this.failed) return;
    this.failed = true;
    process.stderr.write(`procctld: the samplers' thread ${why}; the usage and ports samples are read on the daemon's thread from now on\n`);
  }

  private rejectAll(err: Error): void {
    for (const w of this.waiting.values()) w.reject(err);
    this.waiting.clear();
  }
}

/** The daemon's one sampling thread, shared by the usage and ports samplers. */
export const samplingThread = new SampleThread();
