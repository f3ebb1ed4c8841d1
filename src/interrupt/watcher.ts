import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import type { Registry } from '../session/registry.js';
import type { Interrupt, Session } from '../session/session.js';
import { findStdinReader } from './kernel.js';
import { classifyPrompt, compilePatterns, lastLine, looksLikePrompt } from './prompt.js';

/** Output must have been quiet this long before the kernel is asked: by how sure the last line is a prompt. */
export const QUIET_MS = { recognised: 150, generic: 400, none: 1000 } as const;
const TICK_MS = 50;
/** After a negative look, wait this long (doubling up to the max) before looking again, until new activity. */
const RECHECK_MIN_MS = 100;
const RECHECK_MAX_MS = 3000;
/** At most this many sessions are looked at in the kernel per tick, so a crowd of quiet sessions never stalls requests. */
const LOOKS_PER_TICK = 20;

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

export function interruptView(i: Interrupt | undefined) {
  return i && { ...i, createdAt: new Date(i.createdAt).toISOString(), expiresAt: new Date(i.expiresAt).toISOString() };
}

/**
 * Finds sessions waiting for input (SPEC §7). Sessions are looked at in the kernel only once
 * their output has gone quiet, and then with a backoff, so a thousand quiet sessions cost a
 * few small /proc reads a second; a prompt-looking last line shortens the quiet period.
 */
export class InterruptWatcher {
  private readonly state = new WeakMap<Session, WatchState>();
  private timer: NodeJS.Timeout | undefined;
  private patternsSource: string[] | undefined;
  private patterns: RegExp[] = [];

  constructor(
    private readonly registry: Registry,
    private readonly config: () => Config,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.timer = setInterval(() => this.tick(Date.now()), TICK_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private extraPatterns(): RegExp[] {
    const source = this.config().interrupt.promptPatterns;
    if (source !== this.patternsSource) {
      this.patternsSource = source;
      this.patterns = compilePatterns(source);
    }
    return this.patterns;
  }

  tick(now: number): void {
    const cfg = this.config().interrupt;
    let looks = 0;
    for (const s of this.registry.all()) {
      if (!s.running) continue;
      if (s.interrupt) {
        if (now >= s.interrupt.expiresAt) this.expire(s);
        continue;
      }
      if (!cfg.enabled || !s.stdinOpen || !s.input || s.pid === undefined) continue;
      const quietSince = Math.max(s.output.lastOutputAt ?? s.startedAt, s.lastInputAt ?? 0);
      const quiet = now - quietSince;
      if (quiet < QUIET_MS.recognised) continue;
      let st = this.state.get(s);
      if (!st || st.since !== quietSince) {
        st = { since: quietSince, backoff: 0, nextCheckAt: 0, seenReader: false, prompt: null };
        this.state.set(s, st);
      }
      if (now < st.nextCheckAt || looks >= LOOKS_PER_TICK) continue;
      const extra = this.extraPatterns();
      if (st.prompt === null) st.prompt = looksLikePrompt(lastLine(s.output.tail(500)), extra);
      const prompt = st.prompt;
      if (quiet < QUIET_MS[prompt ?? 'none']) continue;
      looks++;
      if (this.isReadingInput(s, prompt !== undefined)) {
        if (st.seenReader) this.raise(s, extra, cfg.timeoutSeconds, now);
        else st.seenReader = true;
      } else {
        st.seenReader = false;
        st.backoff = Math.min(RECHECK_MAX_MS, Math.max(RECHECK_MIN_MS, st.backoff * 2));
        // Jitter, so sessions started together do not stay in step and crowd one tick.
        st.nextCheckAt = now + st.backoff * (0.75 + Math.random() / 2);
      }
    }
  }

  private isReadingInput(s: Session, promptLike: boolean): boolean {
    if (!s.stdinId) return false;
    const reader = findStdinReader(s.pid!, s.stdinId, s.pty);
    // Blocked in poll/select with the input as fd 0 is less certain: only with a prompt-looking line.
    return reader !== undefined && (reader.how === 'read' || promptLike);
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
