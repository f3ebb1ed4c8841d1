import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { verifyTrail, type VerifyResult } from './verify.js';

/**
 * `verifyTrail` on a thread of its own: a whole trail (256 MiB by default) is read and hashed in
 * seconds, and the daemon keeps answering everyone else meanwhile. One thread per verify, gone
 * when it answers.
 */
export function verifyOffThread(dir: string, head?: { seq: number; hash: string }): Promise<VerifyResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(new URL(import.meta.url), { workerData: { dir, head } });
    let answered = false;
    worker.once('message', (r: VerifyResult) => {
      answered = true;
      resolve(r);
    });
    worker.once('error', reject);
    worker.once('exit', (code) => {
      if (!answered) reject(new Error(`the audit verify thread ended (exit ${code}) without an answer`));
    });
  });
}

if (!isMainThread && parentPort && (workerData as { dir?: unknown } | undefined)?.dir !== undefined) {
  const { dir, head } = workerData as { dir: string; head?: { seq: number; hash: string } };
  parentPort.postMessage(verifyTrail(dir, head));
}
