import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { queryHistory, type HistoryAnswer, type HistoryQuery } from './history.js';
import { verifyTrail, type VerifyResult } from './verify.js';

/**
 * What reads the whole trail, on a thread of its own: a verify (a full trail, 256 MiB by
 * default, is read and hashed in seconds) and a history that scans it (without `since`, every
 * file, each looked at line by line). The daemon keeps answering everyone else meanwhile. One
 * thread per request, gone when it answers.
 */
type Job = { kind: 'verify'; dir: string; head?: { seq: number; hash: string } } | { kind: 'history'; dir: string; query: HistoryQuery };

function offThread<T>(job: Job): Promise<T> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { procctlAuditJob: job } });
    let answered = false;
    worker.once('message', (r: { ok: T } | { error: string }) => {
      answered = true;
      if ('error' in r) reject(new Error(r.error));
      else resolve(r.ok);
    });
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (!answered) reject(new Error(`the audit ${job.kind} thread ended (exit ${code}) without an answer`));
    });
  });
}

export const verifyOffThread = (dir: string, head?: { seq: number; hash: string }): Promise<VerifyResult> => offThread({ kind: 'verify', dir, head });

export const historyOffThread = (dir: string, query: HistoryQuery): Promise<HistoryAnswer> => offThread({ kind: 'history', dir, query });

const job = isMainThread ? undefined : (workerData as { procctlAuditJob?: Job } | undefined)?.procctlAuditJob;
if (job && parentPort) {
  const port = parentPort;
  const run = async () => (job.kind === 'verify' ? verifyTrail(job.dir, job.head) : queryHistory(job.dir, job.query));
  run().then(
    (ok) => port.postMessage({ ok }),
    (err: Error) => port.postMessage({ error: err.message }),
  );
}
