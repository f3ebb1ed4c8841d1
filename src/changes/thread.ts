import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import { ProcctlError, type ErrorKind } from '../base/errors.js';
import { runJob, type ChangesJob, type JobAnswer } from './jobs.js';

/** The thread's own file, compiled beside this one (in the bundle too: it names its modules by their dist/ paths). */
const WORKER = new URL('./worker.js', import.meta.url);

/** The thread ends once it has had nothing to do this long; the next job starts it again (about 30 ms). */
const IDLE_MS = 30_000;

type Answer = { id: number; ok: unknown } | { id: number; error: { message: string; kind?: ErrorKind; details?: Record<string, unknown> } };

/**
 * Where `process changes`, apply, discard and undo read and write a review's files (jobs.ts): a
 * thread of their own, so a review of ten thousand files (0.4-2.5 s of reads, copies and renames
 * on the bench's VM) holds no other client's request. One thread for the daemon, one job at a
 * time there, in the order sent; it ends when idle. Where it cannot run (the sources run as they
 * are, without a build) the jobs run in line, as before.
 */
export class ChangesThread {
  private worker: Worker | undefined;
  private next = 1;
  private readonly waiting = new Map<number, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private idle: NodeJS.Timeout | undefined;

  run<J extends ChangesJob>(job: J): Promise<JobAnswer<J>> {
    const w = this.start();
    if (!w) return new Promise((resolve) => resolve(runJob(job)));
    const id = this.next++;
    clearTimeout(this.idle);
    // A job under way holds the daemon's exit until it is done (shutdown waits for it: held.ts idle).
    w.ref();
    return new Promise((resolve, reject) => {
      this.waiting.set(id, { resolve: resolve as (v: unknown) => void, reject });
      w.postMessage({ id, job });
    });
  }

  /** Ends the thread (a job still under way is answered with an error: shutdown waits for them first). */
  close(): Promise<void> {
    clearTimeout(this.idle);
    const w = this.worker;
    this.worker = undefined;
    return w ? w.terminate().then(() => undefined) : Promise.resolve();
  }

  private start(): Worker | undefined {
    if (this.worker) return this.worker;
    if (WORKER.protocol !== 'file:' || !existsSync(fileURLToPath(WORKER))) return undefined;
    const w = new Worker(WORKER, { name: 'procctl-changes' });
    w.on('message', (a: Answer) => {
      const waiter = this.waiting.get(a.id);
      if (!waiter) return;
      this.waiting.delete(a.id);
      if ('ok' in a) waiter.resolve(a.ok);
      else waiter.reject(a.error.kind ? new ProcctlError(a.error.kind, a.error.message, a.error.details) : new Error(a.error.message));
      if (this.waiting.size === 0) this.rest(w);
    });
    const gone = (why: string) => {
      if (this.worker === w) this.worker = undefined;
      for (const waiter of this.waiting.values()) waiter.reject(new Error(`the changes thread ${why} before it answered; what it did is as the workspace and the review's directory show it`));
      this.waiting.clear();
    };
    w.on('error', (err) => gone(`failed (${err.message})`));
    w.on('exit', (code) => gone(`ended (exit ${code})`));
    this.worker = w;
    return w;
  }

  /** Nothing under way: the thread no longer holds the daemon's exit, and ends if nothing comes. */
  private rest(w: Worker): void {
    w.unref();
    clearTimeout(this.idle);
    this.idle = setTimeout(() => {
      if (this.worker === w && this.waiting.size === 0) void this.close();
    }, IDLE_MS);
    this.idle.unref();
  }
}
