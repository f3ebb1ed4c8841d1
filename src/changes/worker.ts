import { parentPort, workerData } from 'node:worker_threads';
import { ProcctlError } from '../base/errors.js';
import { packageVersion } from '../base/version.js';
import { runJob, type ChangesJob } from './jobs.js';

/**
 * The changes' thread (thread.ts starts it): runs each job it is sent, one at a time, and answers
 * what it did, or the error as a value the daemon's thread makes an error of again. Its files
 * are read when it starts: after an upgrade in place they are the new version's, and it refuses
 * every job, which the daemon then runs in line with its own.
 */
const port = parentPort;
if (!port) throw new Error("changes/worker.js runs as the changes' thread (node:worker_threads), not on its own");

const daemon = (workerData as { version?: string } | null)?.version;
const mine = packageVersion();
const refused = daemon !== undefined && daemon !== mine ? `its files are version ${mine}, the daemon runs ${daemon}` : undefined;

port.on('message', ({ id, job }: { id: number; job: ChangesJob }) => {
  if (refused) return port.postMessage({ id, refused });
  try {
    port.postMessage({ id, ok: runJob(job) });
  } catch (err) {
    const e = err as Error;
    port.postMessage({ id, error: { message: e.message, ...(e instanceof ProcctlError ? { kind: e.kind, details: e.details } : {}) } });
  }
});
