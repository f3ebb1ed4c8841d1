import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ProcctlError, unavailable, type ErrorKind } from '../base/errors.js';
import { packageVersion } from '../base/version.js';
import { runJob, type ChangesJob, type JobAnswer } from './jobs.js';

/** The thread's own file, compiled beside this one (in the bundle too: it names its modules by their dist/ paths). */
const WORKER = new URL('./worker.js', import.meta.url);

/** The version this daemon started as: a thread started after an upgrade in place would load the new files, and refuses. */
const STARTED_AS = packageVersion();

/** The thread ends once it has had nothing to do this long; the next job starts it again (about 30 ms). */
const IDLE_MS = 30_000;

type Answer =
  | { id: number; ok: unknown }
  | { id: number; error: { message: string; kind?: ErrorKind; details?: Record<string, unknown> } }
  /** The thread's files are not this daemon's (an upgrade in place since it started): the job is run here. */
  | { id: number; refused: string };

interface Waiter {
  job: ChangesJob;
  resolve: (v: unknown) => void;
  reject: (e: Error) => void;
}

/**
 * Where `process changes`, apply, discard and undo read and write a review's files (jobs.ts): a
 * thread of their own, so a review of ten thousand files (0.4-4 s of reads, copies and renames
 * on the bench's VM) holds no other client's request. One thread for the daemon, one job at a
 * time there, in the order sent; it ends when idle. Where it cannot run (the sources run as they
 * are, without a build; its files are another version's; it failed to start) the jobs run in
 * line, as before.
 */
export class ChangesThread {
  private worker: Worker | undefined;
  /** The jobs sent to each thread and not answered yet: a thread that ends fails its own, never a newer one's. */
  private readonly waiting = new Map<Worker, Map<number, Waiter>>();
  private next = 1;
  private idle: NodeJS.Timeout | undefined;
  /** Jobs run in line from now on (the thread could not load, or is another version's). */
  private inLine = false;
  private closed = false;

  run<J extends ChangesJob>(job: J): Promise<JobAnswer<J>> {
    if (this.closed) return Promise.reject(unavailable('the daemon is stopping: nothing was read or written; ask again once it is back'));
    const w = this.start();
    if (!w) return new Promise((resolve) => resolve(runJob(job)));
    const id = this.next++;
    clearTimeout(this.idle);
    // A job under way holds the daemon's exit until it is done (shutdown waits for it: held.ts close).
    w.ref();
    return new Promise((resolve, reject) => {
      this.waiting.get(w)!.set(id, { job, resolve: resolve as (v: unknown) => void, reject });
      w.postMessage({ id, job });
    });
  }

  /** Ends the thread and takes no more jobs (held.ts waits for those under way first). */
  close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.idle);
    const w = this.worker;
    this.worker = undefined;
    return w ? w.terminate().then(() => undefined) : Promise.resolve();
  }

  private start(): Worker | undefined {
    if (this.inLine) return undefined;
    if (this.worker) return this.worker;
    if (WORKER.protocol !== 'file:' || !existsSync(fileURLToPath(WORKER))) return undefined;
    const w = new Worker(WORKER, { name: 'procctl-changes', workerData: { version: STARTED_AS } });
    const mine = new Map<number, Waiter>();
    this.waiting.set(w, mine);
    w.on('message', (a: Answer) => {
      const waiter = mine.get(a.id);
      if (!waiter) return;
      mine.delete(a.id);
      if ('ok' in a) waiter.resolve(a.ok);
      else if ('refused' in a) {
        this.inLine = true;
        try {
          waiter.resolve(runJob(waiter.job));
        } catch (err) {
          waiter.reject(err as Error);
        }
      } else waiter.reject(a.error.kind ? new ProcctlError(a.error.kind, a.error.message, a.error.details) : new Error(a.error.message));
      if (mine.size === 0) this.rest(w);
    });
    const gone = (why: string) => {
      if (this.worker === w) this.worker = undefined;
      this.waiting.delete(w);
      for (const waiter of mine.values()) waiter.reject(new Error(`the changes thread ${why} before it answered; what it did is as the workspace and the review's directory show it`));
      mine.clear();
    };
    w.on('error', (err) => {
      // It could not load or died of an error: later jobs run in line.
      this.inLine = true;
      gone(`failed (${err.message})`);
    });
    w.on('exit', (code) => gone(`ended (exit ${code})`));
    this.worker = w;
    return w;
  }

  /** Nothing under way: the thread no longer holds the daemon's exit, and ends if nothing comes. */
  private rest(w: Worker): void {
    w.unref();
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      if (this.worker === w && (this.waiting.get(w)?.size ?? 0) === 0) {
        this.worker = undefined;
        void w.terminate();
      }
    }, IDLE_MS);
    this.idle.unref();
  }
}
