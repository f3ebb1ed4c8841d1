import { parentPort, workerData } from 'node:worker_threads';
import { BenchClient } from '../lib/client.js';

/**
 * The event-loop probe, on its own thread so the soak's own work cannot delay it: a cheap
 * `daemon.status` round trip at a fixed interval, each time posted to the main thread with the
 * wall-clock time it was sent (ms since the epoch, fractional).
 */
export interface ProbeReading {
  sentAt: number;
  ms?: number;
  error?: string;
}

const { socket, intervalMs } = workerData as { socket: string; intervalMs: number };
const client = await BenchClient.connect(socket);
const wallNow = () => performance.timeOrigin + performance.now();

const timer = setInterval(() => {
  const sentAt = wallNow();
  client.timed('daemon.status').then(
    (t) => parentPort!.postMessage({ sentAt, ms: t.receivedMs } satisfies ProbeReading),
    (err: Error) => parentPort!.postMessage({ sentAt, error: err.message } satisfies ProbeReading),
  );
}, intervalMs);

parentPort!.on('message', (msg) => {
  if (msg === 'stop') {
    clearInterval(timer);
    client.close();
    parentPort!.close();
  }
});
