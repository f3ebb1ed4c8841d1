import { compilePattern } from '../config/pattern.js';
import type { Session } from '../session/session.js';
import { watchLines } from './lines.js';

/** output_match events per session: a burst of this many, then this many per second. */
const BURST = 20;
const PER_SECOND = 5;

interface MatchCount {
  sent: number;
  dropped: number;
  /** Dropped since the last event sent: the next one says so. */
  unsaid: number;
}

const counts = new WeakMap<Session, MatchCount>();

/**
 * `notify: {match}`: an `output_match` event (`{line, stream}`) for each line of output that
 * matches, rate-limited per session (a burst of 20, then 5 a second). A match past the limit is
 * counted, not sent: the next event carries `dropped` (how many since the last one), and the
 * session's `exited` event carries `matches: {sent, dropped}`.
 */
export function notifyMatches(session: Session, source: string): void {
  const re = compilePattern(source);
  const count: MatchCount = { sent: 0, dropped: 0, unsaid: 0 };
  counts.set(session, count);
  let tokens = BURST;
  let last = Date.now();
  watchLines(session, (line, stream) => {
    if (!re.test(line)) return;
    const now = Date.now();
    tokens = Math.min(BURST, tokens + ((now - last) * PER_SECOND) / 1000);
    last = now;
    if (tokens < 1) {
      count.dropped++;
      count.unsaid++;
      return;
    }
    tokens--;
    count.sent++;
    session.emit('output_match', { line, stream, ...(count.unsaid ? { dropped: count.unsaid } : {}) });
    count.unsaid = 0;
  });
}

/** What a session's `notify: {match}` sent and dropped, if it has one. */
export function matchCounts(session: Session): { sent: number; dropped: number } | undefined {
  const c = counts.get(session);
  return c && { sent: c.sent, dropped: c.dropped };
}
