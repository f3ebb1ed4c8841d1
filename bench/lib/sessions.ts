import type { BenchClient } from './client.js';

/** Requests in flight while starting many sessions. */
const IN_FLIGHT = 8;

/**
 * Subscribe to `exited` events on this client and return a wait for one session's. An event may
 * arrive before the exec answer with its id has been handled: it is kept until asked for.
 */
export async function exitWaits(client: BenchClient): Promise<(sessionId: string) => Promise<any>> {
  const waiting = new Map<string, (ev: any) => void>();
  const early = new Map<string, any>();
  client.onNotification = (msg) => {
    const ev = msg.params;
    if (msg.method !== 'event' || ev?.type !== 'exited') return;
    const waiter = waiting.get(ev.sessionId);
    if (waiter) waiter(ev);
    else early.set(ev.sessionId, ev);
  };
  await client.call('subscribe', { events: ['exited'] });
  return async (sessionId) => {
    const ev = early.get(sessionId) ?? (await new Promise<any>((r) => waiting.set(sessionId, r)));
    waiting.delete(sessionId);
    early.delete(sessionId);
    return ev;
  };
}

/** Start `count` backgrounded `sleep 600` sessions, a few requests in flight at a time. */
export async function startSleepers(client: BenchClient, count: number, ids: string[], pids: Set<number>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) {
      next++;
      const r = await client.call('exec', { command: 'sleep 600', background: true });
      if (r.status !== 'running' || typeof r.pid !== 'number') throw new Error(`exec sleep answered ${JSON.stringify(r).slice(0, 200)}`);
      ids.push(r.sessionId);
      pids.add(r.pid);
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, worker));
}
