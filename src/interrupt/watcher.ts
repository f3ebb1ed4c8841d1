import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Registry } from '../session/registry.js';
import type { Interrupt, Session } from '../session/session.js';
import { findStdinReaders, readsOffLoop, type ReaderQuery, type StdinReader } from './kernel.js';
import { classifyPrompt, compilePatterns, lastLine, looksLikePrompt } from './prompt.js';

/** Output must have been quiet this long before the kernel is asked: by how sure the last line is a prompt. */
export const QUIET_MS = { recognised: 150, generic: 400, none: 1000 } as const;
const TICK_MS = 50;
/** After a negative look, wait this long (doubling up to the max) before looking again, until new activity. */
const RECHECK_MIN_MS = 100;
const RECHECK_MAX_MS = 3000;
/**
 * At most this many sessions are looked at in the kernel per tick: off the event loop (the
 * addon), enough that a crowd of sessions starting together is seen within a second or two;
 * on it (the JS fallback), few enough that the looks never stall requests for long.
 */
const LOOKS_PER_TICK = { offLoop: 100, onLoop: 20 } as const;

/** A session looked at in the kernel this tick, with what it was looked at for. */
interface Look {
  session: Session;
  state: WatchState;
  /** The quiet period it was in when asked: an answer about an earlier one is stale. */
  since: number;
  promptLike: boolean;
}

interface WatchState {
  /** The quiet period the last look belonged to. */
  since: number;
  backoff: number;
  nextCheckAt: number;
  /** A reader was seen once in this quiet period: confirmed on the next tick, so output still in flight (the prompt) arrives first. */
  seenReader: boolean;
  /** How prompt-like the last line is; the output does not change while the session is quiet. */
  prompt: 'recognised' | 'generic' | undefined | null;
}

/** When the session's current quiet period began: its last output or input. */
const quietStart = (s: Session) => Math.max(s.output.lastOutputAt ?? s.startedAt, s.lastInputAt ?? 0);

export function interruptView(i: Interrupt | undefined) {
  return i && { ...i, createdAt: new Date(i.createdAt).toISOString(), expiresAt: new Date(i.expiresAt).toISOString() };
}

/**
 * Finds sessions waiting for input (SPEC §7). Sessions are looked at in the kernel only once
 * their output has gone quiet, and then with a backoff, so a thousand quiet sessions cost a
 * few small /proc reads a second, made off the event loop; a prompt-looking last line shortens
 * the quiet period.
 */
export class InterruptWatcher {
  private readonly state = new WeakMap<Session, WatchState>();
  private timer: NodeJS.Timeout | undefined;
  private patternsSource: string[] | undefined;
  private patterns: RegExp[] = [];
  /** A batch of looks is out (at most one at a time). */
  private looking = false;
  /** Sessions found waiting, raised one per turn of the event loop: raising one writes its record. */
  private readonly raising: Look[] = [];
  private stopped = false;

  constructor(
    private readonly registry: Registry,
    private readonly config: () => Config,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.stopped = false;
    this.timer = setInterval(() => this.tick(Date.now()), TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
    this.stopped = true;
  }

  private extraPatterns(): RegExp[] {
    const source = this.config().interrupt.promptPatterns;
    if (source !== this.patternsSource) {
      this.patternsSource = source;
      this.patterns = compilePatterns(source);
    }
    return this.patterns;
  }

  /**
   * Pick the quiet sessions due for a look and ask the kernel about them in one batch, off the
   * event loop (see findStdinReaders); the answers are applied when they come back, well before
   * the next tick. While a batch is out, a tick only checks interrupts for expiry.
   */
  tick(now: number): void {
    const cfg = this.config().interrupt;
    const maxLooks = readsOffLoop() ? LOOKS_PER_TICK.offLoop : LOOKS_PER_TICK.onLoop;
    const looks: Look[] = [];
    for (const s of this.registry.all()) {
      if (!s.running) continue;
      if (s.interrupt) {
        if (now >= s.interrupt.expiresAt) this.expire(s);
        continue;
      }
      if (!cfg.enabled || this.looking || !s.stdinOpen || !s.input || s.pid === undefined) continue;
      const quietSince = quietStart(s);
      const quiet = now - quietSince;
      if (quiet < QUIET_MS.recognised) continue;
      let st = this.state.get(s);
      if (!st || st.since !== quietSince) {
        st = { since: quietSince, backoff: 0, nextCheckAt: 0, seenReader: false, prompt: null };
        this.state.set(s, st);
      }
      if (now < st.nextCheckAt || looks.length >= maxLooks) continue;
      if (st.prompt === null) st.prompt = looksLikePrompt(lastLine(s.output.tail(500)), this.extraPatterns());
      const prompt = st.prompt;
      if (quiet < QUIET_MS[prompt ?? 'none']) continue;
      looks.push({ session: s, state: st, since: quietSince, promptLike: prompt !== undefined });
    }
    if (looks.length > 0) this.look(looks, now);
  }

  private look(looks: Look[], now: number): void {
    const queries: ReaderQuery[] = [];
    const asked: Look[] = [];
    for (const l of looks) {
      if (l.session.stdinId) {
        queries.push({ leader: l.session.pid!, stdinId: l.session.stdinId, pty: l.session.pty });
        asked.push(l);
      } else this.settle(l, undefined, now);
    }
    if (queries.length === 0) return;
    this.looking = true;
    findStdinReaders(queries).then(
      (readers) => {
        this.looking = false;
        for (let i = 0; i < asked.length; i++) this.settle(asked[i], readers[i], now);
      },
      (err) => {
        this.looking = false;
        this.log.warn({ err }, 'could not look for sessions waiting for input');
      },
    );
  }

  /** Whether the session moved on since it was looked at (output, input, an end, an interrupt). */
  private stale(l: Look): boolean {
    const s = l.session;
    return this.stopped || !this.config().interrupt.enabled || !s.running || s.interrupt !== undefined || !s.stdinOpen || this.state.get(s) !== l.state || quietStart(s) !== l.since;
  }

  /** What one look found: a reader seen on two looks in a row raises the interrupt. */
  private settle(l: Look, reader: StdinReader | undefined, now: number): void {
    if (this.stale(l)) return;
    const st = l.state;
    // Blocked in poll/select with the input as fd 0 is less certain: only with a prompt-looking line.
    if (reader !== undefined && (reader.how === 'read' || l.promptLike)) {
      if (!st.seenReader) st.seenReader = true;
      else {
        // No more looks in this quiet period: it is raised (or a new period starts).
        st.nextCheckAt = Number.POSITIVE_INFINITY;
        this.raising.push(l);
        if (this.raising.length === 1) setImmediate(() => this.raiseNext());
      }
    } else {
      st.seenReader = false;
      st.backoff = Math.min(RECHECK_MAX_MS, Math.max(RECHECK_MIN_MS, st.backoff * 2));
      // Jitter, so sessions started together do not stay in step and crowd one tick.
      st.nextCheckAt = now + st.backoff * (0.75 + Math.random() / 2);
    }
  }

  private raiseNext(): void {
    const l = this.raising.shift();
    if (l && !this.stale(l)) this.raise(l.session, this.extraPatterns(), this.config().interrupt.timeoutSeconds, Date.now());
    if (this.raising.length > 0) setImmediate(() => this.raiseNext());
  }

  private raise(s: Session, extra: RegExp[], timeoutSeconds: number, now: number): void {
    const tail = s.output.tail(2000);
    const info = classifyPrompt(tail, extra);
    const interrupt: Interrupt = {
      id: `int_${randomBytes(6).toString('hex')}`,
      kind: info.kind,
      reason: info.reason,
      fields: [
        {
          name: info.kind,
          type: info.kind,
          label: info.reason || 'The command is waiting for input',
          required: true,
          ...(info.options ? { options: info.options } : {}),
        },
      ],
      createdAt: now,
      expiresAt: now + timeoutSeconds * 1000,
    };
    s.raiseInterrupt(interrupt);
    s.emit('waiting_input', { interrupt: interruptView(interrupt), tail: tail.slice(-500) });
    this.log.debug({ sessionId: s.id, kind: info.kind }, 'session waiting for input');
  }

  /** Unanswered in time: close the input (the command sees end of input) and record it. */
  private expire(s: Session): void {
    s.input?.end();
    if (!s.pty) s.stdinOpen = false;
    s.settleInterrupt('expired');
    s.wake();
    this.log.info({ sessionId: s.id }, 'interrupt expired; input closed');
  }
}
