import { DaemonUnreachableError, RpcCallError, type DaemonClient } from '../rpc/client.js';
import { connect, hasEnded, note, scoped, type GlobalOptions } from './context.js';
import { missedOutput } from '../rpc/missed-output.js';

export type SessionEvent = Record<string, unknown>;

/** What a command sends through a connection that may be replaced (a feed's, across a restart). */
export interface Caller {
  call<T = any>(method: string, params?: Record<string, unknown>): Promise<T>;
}

/** The events a command that follows one session needs. */
const FOLLOWED = ['output', 'waiting_input', 'exited'];

/** How long a client rides through a planned restart (SPEC §19) before it gives up: 30 s. */
export const RIDE_MS = 30_000;
const RETRY_MS = 250;
/** A pause this long is explained on stderr; a shorter one goes by unremarked. */
export const SAY_AFTER_MS = 3_000;

/** The daemon refused the request because it hands its sessions to a new image: nothing was done, send it again. */
export const isRestarting = (err: unknown): boolean => err instanceof RpcCallError && err.kind === 'restarting';
/** The connection went (a restart closes every connection: each client reconnects). */
export const isLost = (err: unknown): boolean => err instanceof DaemonUnreachableError || (err instanceof Error && err.name === 'DaemonUnreachableError');

/** Calls that may be sent again when their connection went before the answer: they change nothing. */
const READS = new Set(['list', 'log', 'wait']);
const isRead = (method: string, params: Record<string, unknown>) =>
  method === 'subscribe' || method === 'daemon.status' || (method === 'process' && READS.has(String(params.action)));

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A connection subscribed to session events before the session of interest is known (or before
 * its caller is ready), holding them until `follow` says whose events to hand over. So nothing
 * is lost between subscribing and learning the session id.
 *
 * It rides through a planned restart (SPEC §19): when its connection closes, or a call is
 * refused as `restarting`, it connects again (for up to 30 s, saying so on stderr after 3 s),
 * subscribes again, and hands over what it missed meanwhile: the output past the last offset it
 * had (from `log`, by `startChar`), and the session's end if it ended. No character is handed
 * over twice or left out. It holds an offset for every session it has seen, including those
 * already running when it subscribed (the subscribe answer's `outputChars`) that have printed
 * nothing since; a scope-wide feed also hands over the sessions that began while it was away.
 */
export class EventFeed implements Caller {
  private held: SessionEvent[] = [];
  private id: string | undefined;
  private handler: ((e: SessionEvent) => void) | undefined;
  /** Events of the new connection while what was missed is fetched: handed over after it. */
  private catching: SessionEvent[] | undefined;
  /** Where each session's output stood (the end of the last output handed over), and which ended. */
  private readonly seen = new Map<string, number>();
  private readonly ended = new Set<string>();
  /** Sessions whose start was handed over (from the subscription, or found by a reconnect): each once. */
  private readonly begun = new Set<string>();
  /** The scope-wide subscription, narrowed to one session by `follow`. */
  private wide: string | undefined;
  /** When the first subscription was made, by the daemon's clock: a session that began after it and was never seen began while the connection was down. */
  private subscribedAt: number | undefined;
  private conn!: DaemonClient;
  private current!: Promise<DaemonClient>;
  private riding = false;
  private closing = false;
  private gaveUp!: (reason: Error) => void;
  /** Resolves with the reason once the feed gives up: the connection is gone and a new one could not be made. */
  readonly closed = new Promise<Error>((resolve) => (this.gaveUp = resolve));

  private constructor(
    private readonly g: GlobalOptions,
    private readonly sessionId: string | undefined,
    private readonly events: string[] | undefined,
  ) {}

  /**
   * Connect and subscribe to one session's events, or (without `sessionId`) to the scope's;
   * `events` narrows the types (default: output, waiting_input, exited; null: every type).
   */
  static async open(g: GlobalOptions, sessionId?: string, events: string[] | null = FOLLOWED): Promise<EventFeed> {
    const feed = new EventFeed(g, sessionId, events ?? undefined);
    for (const start = Date.now(); ; ) {
      try {
        const c = await feed.dial();
        feed.current = Promise.resolve(c);
        feed.watch(c);
        return feed;
      } catch (err) {
        if (!isRestarting(err) || Date.now() - start > RIDE_MS) throw err;
        await sleep(RETRY_MS);
      }
    }
  }

  /** Connect and subscribe (to the followed session once there is one); the connection is `conn` from now on. */
  private async dial(): Promise<DaemonClient> {
    const c: DaemonClient = await connect(this.g, (n) => {
      if (n.method === 'event' && c === this.conn) this.live(n.params);
    });
    this.conn = c;
    try {
      const target = this.id ?? this.sessionId;
      const answer = await c.call('subscribe', scoped(this.g, { ...(target !== undefined ? { sessionId: target } : {}), ...(this.events ? { events: this.events } : {}) }));
      this.wide = target === undefined ? String(answer.subscription) : undefined;
      // The first subscription: where the output of each session running then stood. Later ones
      // (after a restart) take up from where this feed had got to, not from where the daemon is now.
      if (this.subscribedAt === undefined) {
        const at = Date.parse(String(answer.at));
        if (Number.isFinite(at)) this.subscribedAt = at;
        for (const [id, chars] of Object.entries((answer.outputChars as Record<string, number> | undefined) ?? {})) if (!this.seen.has(id)) this.seen.set(id, chars);
      }
      return c;
    } catch (err) {
      c.close();
      throw err;
    }
  }

  private watch(c: DaemonClient): void {
    void c.closed.then((why) => this.lost(c, why));
  }

  /** Connection `c` went: ride through to a new one, unless it is not the current one or we closed it. */
  private lost(c: DaemonClient, why: Error): void {
    if (this.closing || this.riding || c !== this.conn) return;
    this.riding = true;
    this.catching = [];
    this.current = this.rideThrough(why);
    this.current.then(
      (n) => {
        this.riding = false;
        this.watch(n);
      },
      (err: Error) => {
        this.riding = false;
        this.gaveUp(err);
      },
    );
  }

  private async rideThrough(why: Error): Promise<DaemonClient> {
    const start = Date.now();
    let said = false;
    for (;;) {
      if (this.closing) throw why;
      try {
        const c = await this.dial();
        await this.catchUp(c);
        if (said) note('procctl: the daemon serves again; going on');
        return c;
      } catch (err) {
        if (!isRestarting(err) && !isLost(err)) throw err;
        if (Date.now() - start > RIDE_MS) {
          throw new DaemonUnreachableError(this.conn.where, `${why instanceof DaemonUnreachableError ? why.reason : why.message}; no new connection was answered within ${RIDE_MS / 1000} s`, 'lost');
        }
        if (!said && Date.now() - start > SAY_AFTER_MS) {
          note(`procctl: the daemon is restarting (the connection closed); waiting for it, up to ${RIDE_MS / 1000} s`);
          said = true;
        }
        await sleep(RETRY_MS);
      }
    }
  }

  /**
   * On a new connection: hand over what each session we had events of did meanwhile (a scope-wide
   * feed also the sessions that began meanwhile), then what the connection held. All is read
   * first, then handed over in order: the starts, the output, the ends; so a reader that stops at
   * the last end (`events` without -f) has been told of every session that began.
   */
  private async catchUp(c: DaemonClient): Promise<void> {
    const wide = this.id === undefined && this.handler !== undefined;
    const ids = this.id !== undefined ? [this.id] : wide ? [...this.seen.keys()].filter((id) => !this.ended.has(id)) : [];
    const wants = (type: string) => this.events === undefined || this.events.includes(type);
    const starts: SessionEvent[] = [];
    const output: SessionEvent[] = [];
    const ends: SessionEvent[] = [];
    let listed: SessionEvent[] | undefined;
    const records = async () => (listed ??= (await c.call('process', scoped(this.g, { action: 'list' }))).sessions as SessionEvent[]);
    /** What session `id` printed past `from`, and its end if it ended. */
    const missed = async (id: string, from: number) => {
      let got: { events: SessionEvent[]; status: unknown };
      try {
        got = await missedOutput((limit) => c.call('process', scoped(this.g, { action: 'log', sessionId: id, limit })), id, from);
      } catch (err) {
        if (!(err instanceof RpcCallError && err.kind === 'not_found')) throw err;
        // Ended and forgotten (removed, or past its TTL) while the connection was down.
        if (wants('exited')) ends.push({ type: 'exited', sessionId: id, status: 'unknown', text: 'It ended and was forgotten while the connection to the daemon was down; how it ended is not known.' });
        return;
      }
      output.push(...got.events);
      if (!hasEnded(got.status) || !wants('exited')) return;
      let rec = (await records()).find((s) => s.sessionId === id);
      // A list read before it ended says it runs: read again.
      if (rec && !hasEnded(rec.status)) {
        listed = undefined;
        rec = (await records()).find((s) => s.sessionId === id);
      }
      ends.push({ ...(rec ?? { status: got.status }), type: 'exited', sessionId: id });
    };
    for (const id of ids) {
      const from = this.seen.get(id) ?? 0;
      // A session tracked from a list by a daemon that does not say where its output stood (-1): only whether it ended.
      await missed(id, from < 0 ? Infinity : from);
    }
    // Sessions that began while the connection was down: their start, their output from the first character, their end.
    if (wide && this.subscribedAt !== undefined) {
      const since = this.subscribedAt;
      const born = (await records()).filter((rec) => {
        const id = String(rec.sessionId);
        return !this.seen.has(id) && !this.ended.has(id) && rec.status !== 'approval_required' && Date.parse(String(rec.startedAt)) >= since;
      });
      for (const rec of born.reverse()) {
        const id = String(rec.sessionId);
        const { name, command, pid, cwd, scope } = rec;
        if (wants('started')) starts.push({ type: 'started', sessionId: id, name, command, pid, cwd, ...(scope !== undefined ? { scope } : {}), at: rec.startedAt });
        await missed(id, 0);
      }
    }
    for (const e of [...starts, ...output, ...ends]) this.receive(e);
    const held = this.catching ?? [];
    this.catching = undefined;
    for (const e of held) this.receive(e);
  }

  private live(e: SessionEvent): void {
    if (this.catching) this.catching.push(e);
    else this.receive(e);
  }

  private receive(e: SessionEvent): void {
    if (!this.handler) this.held.push(e);
    else if (this.id === undefined || e.sessionId === this.id || e.type === 'dropped') this.handOn(e);
  }

  /** An event to the handler; output only past what was handed over already (by offset), an end once. */
  private handOn(e: SessionEvent): void {
    const id = String(e.sessionId);
    if (e.type === 'output') {
      const data = String(e.data ?? '');
      const offset = Number(e.offset);
      if (Number.isFinite(offset)) {
        const seen = this.seen.get(id) ?? 0;
        if (offset + data.length <= seen) return;
        this.seen.set(id, offset + data.length);
        if (offset < seen) e = { ...e, data: data.slice(seen - offset), offset: seen };
      }
    } else if (e.type === 'exited') {
      if (this.ended.has(id)) return;
      this.ended.add(id);
    } else if (e.type === 'started') {
      if (this.begun.has(id)) return;
      this.begun.add(id);
      if (!this.seen.has(id)) this.seen.set(id, 0);
    } else if (e.sessionId !== undefined && !this.seen.has(id)) this.seen.set(id, 0);
    this.handler!(e);
  }

  /**
   * Hand the held events of session `id`, then its live ones, to `handler` (output from `from`,
   * the offset in its whole output already shown); other sessions' events are dropped, and a
   * scope-wide subscription is narrowed to the session.
   */
  follow(id: string, handler: (e: SessionEvent) => void, from = 0): void {
    this.id = id;
    this.handler = handler;
    this.seen.set(id, from);
    for (const e of this.held.splice(0)) this.receive(e);
    const wide = this.wide;
    if (wide === undefined) return;
    this.wide = undefined;
    const c = this.conn;
    void c
      .call('subscribe', scoped(this.g, { sessionId: id, ...(this.events ? { events: this.events } : {}) }))
      .then(() => c.call('unsubscribe', { subscription: wide }))
      .catch(() => undefined); // the wide subscription keeps working
  }

  /** Sessions listed as running: should one end while the connection is down, its end is handed over too. */
  track(ids: Iterable<string>): void {
    for (const id of ids) if (!this.seen.has(id)) this.seen.set(id, -1);
  }

  /** Every event of the subscription to `handler`, each session's output once (the `events` command). */
  followAll(handler: (e: SessionEvent) => void): void {
    this.handler = handler;
    for (const e of this.held.splice(0)) this.receive(e);
  }

  /**
   * Call a method on the current connection. A refusal as `restarting` is sent again (on the
   * new connection once there is one), and so is a read whose connection went before its answer.
   */
  async call<T = any>(method: string, params: Record<string, unknown> = {}): Promise<T> {
    const start = Date.now();
    // Once refused as `restarting`, a connection that closes before the next answer is the restart's
    // last moment: the old image answers what it read, so what got no answer was not done.
    let restarting = false;
    for (;;) {
      const c = await this.current;
      try {
        return await c.call<T>(method, params);
      } catch (err) {
        restarting ||= isRestarting(err);
        const again = isRestarting(err) || (isLost(err) && !this.closing && (restarting || isRead(method, params)));
        if (!again || Date.now() - start > RIDE_MS) throw err;
        if (isLost(err)) this.lost(c, err as Error);
        else await sleep(RETRY_MS);
      }
    }
  }

  close(): void {
    this.closing = true;
    this.conn.close();
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
