import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { UsagePlan, UsageReading } from '../cgroup/session.js';
import type { PortsPlan, PortsReading, Table } from './ports-read.js';

/** What the daemon asks the sampling thread: one batch of plans to read. */
export type ToSampleThread = { id: number; kind: 'usage'; plans: UsagePlan[] } | { id: number; kind: 'ports'; plans: PortsPlan[] };

/** What it answers: each plan's reading (null where the read failed), the thread's CPU time for the batch, and for ports the namespaces' tables. */
export type FromSampleThread =
  | { kind: 'ready'; priority: SamplePriority }
  | { id: number; kind: 'usage'; readings: (UsageReading | null)[]; cpuMs: number }
  | { id: number; kind: 'ports'; readings: (PortsReading | null)[]; tables: Map<string, Table>; cpuMs: number };

/** The priority the thread got: SCHED_IDLE (the addon's idleThread), else nice 19, else none it could set. */
export type SamplePriority = 'idle' | 'nice 19' | 'normal';

const WORKER = new URL('./sample-worker.js', import.meta.url);

type Answer<K extends FromSampleThread['kind']> = Extract<FromSampleThread, { kind: K }>;

/**
 * The samplers' thread (sample-worker.ts): the periodic refreshes of the usage and ports samplers
 * (runner/cgroup.ts, runner/ports.ts) read every held session's files there, a batch a refresh,
 * and the daemon's thread only makes the samples from what comes back, in one turn. At a thousand
 * sessions those reads took 3.5-5% of the daemon's thread in 0.1 ms turns that 2-4% of requests
 * met; the thread runs at the lowest priority the kernel gives without privileges (SCHED_IDLE,
 * else nice 19), so a request preempts it at once. It gets paths and pids, never a session.
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
  /** The priority the thread said it got (undefined until it said). */
  priority: SamplePriority | undefined;

  /** Whether the thread's code is there (a build; not when the sources run as they are, e.g. under a test runner). */
  static available(): boolean {
    return WORKER.protocol === 'file:' && existsSync(fileURLToPath(WORKER));
  }

  /** Read usage plans there; undefined when there is no thread to read them. */
  usage(plans: UsagePlan[]): Promise<Answer<'usage'>> | undefined {
    return this.ask({ id: 0, kind: 'usage', plans }) as Promise<Answer<'usage'>> | undefined;
  }

  /** Read ports plans there; undefined when there is no thread to read them. */
  ports(plans: PortsPlan[]): Promise<Answer<'ports'>> | undefined {
    return this.ask({ id: 0, kind: 'ports', plans }) as Promise<Answer<'ports'>> | undefined;
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
    const worker = this.start();
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
      worker = new Worker(WORKER, { name: 'procctl-sampler', env, resourceLimits: { maxOldGenerationSizeMb: 64, maxYoungGenerationSizeMb: 8 } });
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
