import { customAlphabet } from 'nanoid';
import { notFound } from '../base/errors.js';
import { EventBus } from './events.js';
import type { Session } from './session.js';
import { ALL_SCOPES } from '../config/schema.js';

export { ALL_SCOPES };

const inScope = (s: Session, scope: string) => scope === ALL_SCOPES || s.scope === scope;

/** A short id that is easy to read and type: 8 of lowercase letters and digits without 0/o, 1/l. */
export const newSessionId = customAlphabet('abcdefghijkmnpqrstuvwxyz23456789', 8);

/** Which finished sessions have outlived their TTL at `now` (pure; unit-tested with a fake clock). */
export function expiredSessions(sessions: Iterable<Session>, now: number, ttlMs: number): Session[] {
  const out: Session[] = [];
  for (const s of sessions) if (s.endedAt !== undefined && now - s.endedAt >= ttlMs) out.push(s);
  return out;
}

/** A session's place in the orders pages are served from: the daemon's and its scope's. */
interface Slot {
  /** Undefined once deleted: a hole, closed at the next page of each order that holds it. */
  session: Session | undefined;
  /** Counted among its orders' running sessions. */
  running: boolean;
  scope: string;
}

/**
 * Sessions in the order they were added, oldest first: a page is read from the newest end by
 * position, and the counts are kept as sessions come, stop and go, so a page of 50 costs 50
 * whatever the number of sessions. A delete leaves a hole, closed in place (no allocation) by the
 * next page.
 */
class Order {
  slots: Slot[] = [];
  holes = 0;
  running = 0;

  /** One of its sessions was deleted; the holes are closed once they are as many as the sessions. */
  left(): void {
    this.holes++;
    if (this.holes > 64 && this.holes * 2 > this.slots.length) this.closeHoles();
  }

  closeHoles(): void {
    if (this.holes === 0) return;
    const slots = this.slots;
    let to = 0;
    for (let from = 0; from < slots.length; from++) if (slots[from].session !== undefined) slots[to++] = slots[from];
    slots.length = to;
    this.holes = 0;
  }
}

const EMPTY_ORDER = new Order();

/**
 * Every session the daemon knows, by id. Access is always through a scope: a session of another
 * scope is indistinguishable from one that does not exist.
 */
export class Registry {
  readonly events = new EventBus();
  private readonly sessions = new Map<string, Session>();
  /** Sessions added while running and not yet ended: `running()` walks these, not every finished one kept. */
  private readonly liveSet = new Set<Session>();
  private readonly keyLocks = new Map<string, Promise<void>>();
  /** Each session's place in `everyone` and in its scope's order, by id. */
  private readonly slots = new Map<string, Slot>();
  /** Every session, in the order added (scope "*"). */
  private readonly everyone = new Order();
  private readonly byScope = new Map<string, Order>();
  private changes = 0;

  /**
   * Counts every change to which sessions there are and which of them run: while it stays the
   * same, a figure made from the running sessions (daemon.status's totals) needs no walk of them.
   */
  get version(): number {
    return this.changes;
  }

  newId(): string {
    for (;;) {
      const id = newSessionId();
      if (!this.sessions.has(id)) return id;
    }
  }

  has(id: string): boolean {
    return this.sessions.has(id);
  }

  /** Told of each session added (the interrupt watcher plans its first visit), after it is in place. */
  private readonly addListeners: ((session: Session) => void)[] = [];

  onAdd(listener: (session: Session) => void): void {
    this.addListeners.push(listener);
  }

  add(session: Session): void {
    // An approved exec's session takes the place of the one that waited for it.
    const before = this.sessions.get(session.id);
    if (before) this.liveSet.delete(before);
    this.changes++;
    this.sessions.set(session.id, session);
    if (session.running) {
      this.liveSet.add(session);
      void session.finished.then(() => this.liveSet.delete(session));
    }
    this.place(session);
    for (const listener of this.addListeners) listener(session);
  }

  /** Put `session` in the page orders: at the end, or where the one of its id was (a Map keeps a replaced key's place). */
  private place(session: Session): void {
    let slot = this.slots.get(session.id);
    if (slot === undefined) {
      slot = { session, running: false, scope: session.scope };
      this.slots.set(session.id, slot);
      this.everyone.slots.push(slot);
      this.orderOf(session.scope).slots.push(slot);
    } else {
      this.count(slot, -1);
      slot.running = false;
      slot.session = session;
      if (slot.scope !== session.scope) {
        slot.scope = session.scope;
        this.reorderScopes();
      }
    }
    slot.running = session.running;
    this.count(slot, 1);
    session.onStop = this.stopped;
  }

  /** A session stopped running (ended, or waits for an approval): it leaves the running counts at once. */
  private readonly stopped = (session: Session): void => {
    const slot = this.slots.get(session.id);
    if (slot === undefined || slot.session !== session || !slot.running) return;
    this.count(slot, -1);
    slot.running = false;
  };

  private count(slot: Slot, by: 1 | -1): void {
    if (!slot.running) return;
    this.changes++;
    this.everyone.running += by;
    this.orderOf(slot.scope).running += by;
  }

  /** The scope's order, made for its first session. */
  private orderOf(scope: string): Order {
    let order = this.byScope.get(scope);
    if (order === undefined) this.byScope.set(scope, (order = new Order()));
    return order;
  }

  /** The scopes' orders again from the daemon's, for a replacement in another scope (never seen in use; kept right anyway). */
  private reorderScopes(): void {
    this.everyone.closeHoles();
    this.byScope.clear();
    for (const slot of this.everyone.slots) {
      const order = this.orderOf(slot.scope);
      order.slots.push(slot);
      if (slot.running) order.running++;
    }
  }

  /** The session, if it exists in this scope. */
  find(scope: string, id: string): Session | undefined {
    const s = this.sessions.get(id);
    return s && inScope(s, scope) ? s : undefined;
  }

  /** The session, if it exists in this scope; else `not_found`. */
  get(scope: string, id: string): Session {
    const s = this.find(scope, id);
    if (!s) {
      throw notFound(`no session "${id}" in scope "${scope}"; list sessions with process {action:"list"} (finished sessions are forgotten after their TTL)`);
    }
    return s;
  }

  /** Sessions of a scope, newest first. */
  list(scope: string): Session[] {
    const out: Session[] = [];
    for (const s of this.sessions.values()) if (inScope(s, scope)) out.push(s);
    return out.reverse();
  }

  /**
   * One page of a scope's sessions, newest first: positions [offset, offset + limit), or to the
   * end without a limit; with how many sessions the scope has and how many are still running.
   * Read by position from the scope's order, counts kept as sessions change: no walk of the
   * sessions, and only the page is allocated.
   */
  page(scope: string, offset = 0, limit = Number.POSITIVE_INFINITY): { sessions: Session[]; total: number; running: number } {
    const order = scope === ALL_SCOPES ? this.everyone : (this.byScope.get(scope) ?? EMPTY_ORDER);
    order.closeHoles();
    const slots = order.slots;
    const total = slots.length;
    // Newest first is the order backwards, so the page is positions [first, end), read from the back.
    const end = Math.max(0, total - offset);
    const first = Math.max(0, end - limit);
    const sessions: Session[] = new Array<Session>(Math.max(0, end - first));
    for (let i = 0; i < sessions.length; i++) sessions[i] = slots[end - 1 - i].session!;
    return { sessions, total, running: order.running };
  }

  all(): IterableIterator<Session> {
    return this.sessions.values();
  }

  /**
   * Visit every session, in the order added. A walk made at every request (daemon.status holds a
   * usage sample of each) goes this way: a `for…of` over `all()` where the optimizer does not
   * inline the iterator made a result object per session, 39 kB a status at 1,000 sessions.
   */
  forEach(visit: (s: Session) => void): void {
    this.sessions.forEach((s) => visit(s));
  }

  /** The sessions added while running and not yet seen to end, live: a walk sees those added during it. */
  live(): IterableIterator<Session> {
    return this.liveSet.values();
  }

  /** Whether any session is live (added while running, not yet seen to end). */
  hasLive(): boolean {
    return this.liveSet.size > 0;
  }

  running(scope?: string): Session[] {
    const out: Session[] = [];
    for (const s of this.liveSet) if (s.running && this.sessions.get(s.id) === s && (scope === undefined || inScope(s, scope))) out.push(s);
    return out;
  }

  counts(): { running: number; finished: number } {
    const running = this.everyone.running;
    return { running, finished: this.sessions.size - running };
  }

  delete(id: string): void {
    const s = this.sessions.get(id);
    if (s) this.liveSet.delete(s);
    if (this.sessions.delete(id)) this.changes++;
    const slot = this.slots.get(id);
    if (slot === undefined) return;
    this.count(slot, -1);
    slot.session = undefined;
    slot.running = false;
    this.slots.delete(id);
    this.everyone.left();
    const order = this.orderOf(slot.scope);
    order.left();
    if (order.slots.length === order.holes) this.byScope.delete(slot.scope);
  }

  /** Run `fn` alone among calls for the same thread key and scope, so two starts cannot overlap. */
  async withKeyLock<T>(scope: string, key: string, fn: () => Promise<T>): Promise<T> {
    const k = `${scope}\u0000${key}`;
    const previous = this.keyLocks.get(k) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const tail = previous.then(() => mine);
    this.keyLocks.set(k, tail);
    await previous;
    try {
      return await fn();
    } finally {
      release();
      if (this.keyLocks.get(k) === tail) this.keyLocks.delete(k);
    }
  }

  /** Finished sessions older than the TTL, to be forgotten. */
  expired(now: number, ttlMs: number): Session[] {
    return expiredSessions(this.sessions.values(), now, ttlMs);
  }
}
