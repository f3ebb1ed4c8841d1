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

/**
 * Every session the daemon knows, by id. Access is always through a scope: a session of another
 * scope is indistinguishable from one that does not exist.
 */
export class Registry {
  readonly events = new EventBus();
  private readonly sessions = new Map<string, Session>();
  /** Sessions added while running and not yet ended: `running()` walks these, not every finished one kept. */
  private readonly live = new Set<Session>();
  private readonly keyLocks = new Map<string, Promise<void>>();

  newId(): string {
    for (;;) {
      const id = newSessionId();
      if (!this.sessions.has(id)) return id;
    }
  }

  has(id: string): boolean {
    return this.sessions.has(id);
  }

  add(session: Session): void {
    // An approved exec's session takes the place of the one that waited for it.
    const before = this.sessions.get(session.id);
    if (before) this.live.delete(before);
    this.sessions.set(session.id, session);
    if (session.running) {
      this.live.add(session);
      void session.finished.then(() => this.live.delete(session));
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
   * Two walks of the map and no copy of it: only the page is allocated.
   */
  page(scope: string, offset = 0, limit = Number.POSITIVE_INFINITY): { sessions: Session[]; total: number; running: number } {
    let total = 0;
    let running = 0;
    for (const s of this.sessions.values()) {
      if (!inScope(s, scope)) continue;
      total++;
      if (s.running) running++;
    }
    // Newest first is insertion order backwards, so the page is insertion positions [first, end).
    const end = Math.max(0, total - offset);
    const first = Math.max(0, end - limit);
    // Made at its size and filled from the back (newest first): no growing, no reversing.
    const sessions: Session[] = new Array<Session>(Math.max(0, end - first));
    if (first < end) {
      let i = 0;
      let at = sessions.length;
      for (const s of this.sessions.values()) {
        if (!inScope(s, scope)) continue;
        if (i >= first) sessions[--at] = s;
        if (++i === end) break;
      }
    }
    return { sessions, total, running };
  }

  all(): IterableIterator<Session> {
    return this.sessions.values();
  }

  running(scope?: string): Session[] {
    const out: Session[] = [];
    for (const s of this.live) if (s.running && this.sessions.get(s.id) === s && (scope === undefined || inScope(s, scope))) out.push(s);
    return out;
  }

  counts(): { running: number; finished: number } {
    let running = 0;
    for (const s of this.sessions.values()) if (s.running) running++;
    return { running, finished: this.sessions.size - running };
  }

  delete(id: string): void {
    const s = this.sessions.get(id);
    if (s) this.live.delete(s);
    this.sessions.delete(id);
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
