import type { DaemonClient } from '../rpc/client.js';
import { connect, scoped, type GlobalOptions } from './context.js';

export type SessionEvent = Record<string, unknown>;

/** The events a command that follows one session needs. */
const FOLLOWED = ['output', 'waiting_input', 'exited'];

/**
 * A connection subscribed to session events before the session of interest is known (or before
 * its caller is ready), holding them until `follow` says whose events to hand over. So nothing
 * is lost between subscribing and learning the session id.
 */
export class EventFeed {
  private held: SessionEvent[] = [];
  private id: string | undefined;
  private handler: ((e: SessionEvent) => void) | undefined;

  private constructor(
    private readonly g: GlobalOptions,
    readonly client: DaemonClient,
    /** The scope-wide subscription, narrowed to one session by `follow`. */
    private wide: string | undefined,
  ) {}

  /** Connect and subscribe to one session's events, or (without `sessionId`) to the scope's. */
  static async open(g: GlobalOptions, sessionId?: string): Promise<EventFeed> {
    let feed: EventFeed | undefined;
    const early: SessionEvent[] = [];
    const client = await connect(g, (n) => {
      if (n.method !== 'event') return;
      if (feed) feed.receive(n.params);
      else early.push(n.params);
    });
    try {
      const params = { ...(sessionId !== undefined ? { sessionId } : {}), events: FOLLOWED };
      const { subscription } = await client.call('subscribe', scoped(g, params));
      feed = new EventFeed(g, client, sessionId === undefined ? String(subscription) : undefined);
      feed.held.push(...early);
      return feed;
    } catch (err) {
      client.close();
      throw err;
    }
  }

  /** Resolves with the reason once the connection is gone. */
  get closed() {
    return this.client.closed;
  }

  private receive(e: SessionEvent): void {
    if (!this.handler) this.held.push(e);
    else if (e.sessionId === this.id || e.type === 'dropped') this.handler(e);
  }

  /**
   * Hand the held events of session `id`, then its live ones, to `handler`; other sessions'
   * events are dropped, and a scope-wide subscription is narrowed to the session. Events may
   * arrive twice while narrowing: handlers skip output they have seen (OutputCursor) and
   * act on `exited` once.
   */
  follow(id: string, handler: (e: SessionEvent) => void): void {
    this.id = id;
    this.handler = handler;
    for (const e of this.held.splice(0)) this.receive(e);
    const wide = this.wide;
    if (wide === undefined) return;
    this.wide = undefined;
    void this.client
      .call('subscribe', scoped(this.g, { sessionId: id, events: FOLLOWED }))
      .then(() => this.client.call('unsubscribe', { subscription: wide }))
      .catch(() => undefined); // the wide subscription keeps working
  }

  close(): void {
    this.client.close();
  }
}

/** Skips output already shown (by offset into the session's whole output), so nothing prints twice. */
export class OutputCursor {
  constructor(private seen = 0) {}

  /** The part of an `output` event not shown yet ('' if none). */
  fresh(e: SessionEvent): string {
    const data = String(e.data ?? '');
    const offset = Number(e.offset);
    if (!Number.isFinite(offset)) return data;
    if (offset + data.length <= this.seen) return '';
    const fresh = data.slice(Math.max(0, this.seen - offset));
    this.seen = offset + data.length;
    return fresh;
  }
}
