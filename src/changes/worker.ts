import { parentPort } from 'node:worker_threads';
import { ProcctlError } from '../base/errors.js';
import { runJob, type ChangesJob } from './jobs.js';

/**
 * The changes' thread (thread.ts starts it): runs each job it is sent, one at a time, and answers
 * what it did, or the error as a value the daemon's thread makes an error of again.
 */
const port = parentPort;
if (!port) throw new Error("changes/worker.js runs as the changes' thread (node:worker_threads), not on its own");

port.on('message', ({ id, job }: { id: number; job: ChangesJob }) => {
  try {
    port.postMessage({ id, ok: runJob(job) });
  } catch (err) {
    const e = err as Error;
    port.postMessage({ id, error: { message: e.message, ...(e instanceof ProcctlError ? { kind: e.kind, details: e.details } : {}) } });
  }
});
