import type { BenchClient } from '../lib/client.js';
import { SoakTimeout } from './record.js';

/** How long an event nobody waited for is kept: it may arrive before the answer naming its session. */
const KEEP_EARLY_MS = 120_000;

type Waiter = (ev: any) => void;

/**
 * The `exited` and `waiting_input` events of one agent's connection, handed to whoever waits
 * for a session's event. An event may arrive before the exec answer that names its session, so
 * unclaimed events are kept for a while, then dropped: the soak itself must not grow.
 */
export class SessionEvents {
  private readonly waiting = new Map<string, Waiter>();
  private readonly early = new Map<string, { ev: any; at: number }>();
  /** Every event seen, by type, for the report. */
  readonly counts: Record<string, number> = {};

  private constructor(private readonly client: BenchClient) {
    client.onNotification = (msg) => {
      if (msg.method !== 'event') return;
      const ev = msg.params;
      this.counts[ev.type] = (this.counts[ev.type] ?? 0) + 1;
      const key = `${ev.type}:${ev.sessionId}`;
      const waiter = this.waiting.get(key);
      if (waiter) {
        this.waiting.delete(key);
        waiter(ev);
        return;
      }
      this.early.delete(key); // re-inserted last, so the map stays in arrival order
      this.early.set(key, { ev, at: Date.now() });
      this.prune();
    };
  }

  static async subscribe(client: BenchClient, scope: string): Promise<SessionEvents> {
    const events = new SessionEvents(client);
    await client.call('subscribe', { scope, events: ['exited', 'waiting_input'] });
    return events;
  }

  /** The next `type` event of a session (or the one that already came), within `ms`. */
  next(type: 'exited' | 'waiting_input', sessionId: string, ms: number): Promise<any> {
    const key = `${type}:${sessionId}`;
    const kept = this.early.get(key);
    if (kept) {
      this.early.delete(key);
      return Promise.resolve(kept.ev);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.waiting.delete(key);
        reject(new SoakTimeout(`no ${type} event for ${sessionId} within ${ms} ms`));
      }, ms);
      this.waiting.set(key, (ev) => {
        clearTimeout(timer);
        resolve(ev);
      });
    });
  }

  /** Forget a session's unclaimed events (one that was answered some other way). */
  forget(sessionId: string): void {
    this.early.delete(`exited:${sessionId}`);
    this.early.delete(`waiting_input:${sessionId}`);
  }

  private prune(): void {
    const cutoff = Date.now() - KEEP_EARLY_MS;
    for (const [key, { at }] of this.early) {
      if (at >= cutoff) break; // insertion order is arrival order
      this.early.delete(key);
    }
  }

  get pending(): number {
    return this.early.size + this.waiting.size;
  }

  close(): void {
    this.client.close();
  }
}
