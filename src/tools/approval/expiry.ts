import type { Session } from '../../session/session.js';

/** The expiry timer of each session's pending question (a session has one question at a time). */
const timers = new WeakMap<Session, NodeJS.Timeout>();

/**
 * Call `expire` once the wall clock has passed `at`, replacing any timer the session had. A
 * timer may fire a millisecond early by the wall clock (the loop's time is cached): never before `at`.
 */
export function expireAt(s: Session, at: number, expire: () => void): void {
  clearTimeout(timers.get(s));
  const timer = setTimeout(() => {
    if (Date.now() < at) return expireAt(s, at, expire);
    timers.delete(s);
    expire();
  }, Math.max(0, at - Date.now()));
  timer.unref();
  timers.set(s, timer);
}

/** The question was answered or ended otherwise: no expiry. */
export function disarm(s: Session): void {
  clearTimeout(timers.get(s));
  timers.delete(s);
}
