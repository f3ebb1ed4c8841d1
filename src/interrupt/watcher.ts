import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { ALL_SCOPES, type Registry } from '../session/registry.js';
import type { Interrupt, Session } from '../session/session.js';
import { findStdinReaders, lookThread, readsOffLoop, type ReaderQuery, type StdinReader } from './kernel.js';
import { classifyPrompt, compilePatterns, lastLine, looksLikePrompt } from './prompt.js';
import { VisitSchedule } from './schedule.js';
import { trace } from '../base/trace.js';

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
/**
 * Besides the sessions due, a tick visits at most this many sessions in turn (the sweep), to
 * find new sessions and quiet periods that began while a session was backing off. Touching every
 * session of a thousand at each tick costs a quarter to half a millisecond of cache misses on a
 * busy machine; with up to this many sessions, every one is still visited at every sweep.
 */
const SWEEP_PER_TICK = 200;
/**
 * And the sweep stops once it has held the thread this long (checked every SWEEP_CHECK visits):
 * a request that comes during a tick waits for it. At 1,000 sessions a sweep of 200 took 0.34 ms
 * a tick (the median, twenty ticks a second), the longest thing on the thread a poll met
 * (docs/benchmarks.md, "Tails at 1,000 sessions, traced"); the pass over every session then
 * takes a second or two instead of a quarter of one. What is planned (a new session, a quiet period started
 * by input, an answer or a continue, an expiry) does not wait for it: see docs/interrupts.md.
 */
const SWEEP_SLICE_MS = 0.05;
const SWEEP_CHECK = 8;
/**
 * The watcher has no steady tick: its timer is set for the next visit planned (on a grid of
 * TICK_MS, one tick a grid point at most), so a quiet daemon is woken only when something is due. Visits
 * that can wait (a look after a backoff of RELAXED_FROM_MS or more, and the sweep) are planned on a
 * grid of this many ms, so a thousand quiet sessions share a few wake-ups a second. Ticking 20
 * times a second held an idle daemon's thread 6-10% of a core on the bench's VM, whose vCPU wakes
 * slowly (a Node timer doing nothing costs ~3 ms of CPU a wake there): docs/benchmarks.md.
 *
 * The sweep runs at most once a grid step, while any session is live. Everything that needs a
 * visit soon is planned (a new session, a quiet period started by input, an answer or a
 * continue, a backoff's end, an expiry), so the sweep only catches what no plan covers: a
 * session that printed while backing off (its backoff ends within 3 s and plans its visit
 * anyway), or running sessions when a reload of the config switches detection on.
 */
const RELAXED_MS = 500;
const RELAXED_FROM_MS = 1000;
const SWEEP_DETECTION_OFF_MS = 5000;
/** The first point of a grid of `step` ms after `t`. */
const after = (t: number, step: number) => (Math.floor(t / step) + 1) * step;
/** The tick after the one at `now` (a timer fires a little after its grid point). */
const nextTick = (now: number) => after(now, TICK_MS);
/** The first grid point of the relaxed visits after `t`. */
const relaxed = (t: number) => after(t, RELAXED_MS);

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
  /** A look at it is out: it is not asked about again until the answer is in. */
  asked: boolean;
}

/** When the session's current quiet period began: its last output or input, or when it was continued after a pause. */
const quietStart = (s: Session) => Math.max(s.output.lastOutputAt ?? s.startedAt, s.lastInputAt ?? 0, s.lastContinuedAt ?? 0);

type InterruptView = Omit<Interrupt, 'createdAt' | 'expiresAt'> & { createdAt: string; expiresAt: string };

/** Views already made: an interrupt does not change once raised, and `list` shows it at every call. */
const views = new WeakMap<Interrupt, InterruptView>();

/** An interrupt as the protocol shows it, with ISO instants. */
export function interruptView(i: Interrupt | undefined): InterruptView | undefined {
  if (!i) return undefined;
  let view = views.get(i);
  if (!view) {
    view = { ...i, createdAt: new Date(i.createdAt).toISOString(), expiresAt: new Date(i.expiresAt).toISOString() };
    views.set(i, view);
  }
  return view;
}

/**
 * Finds sessions waiting for input (SPEC §7). Sessions are looked at in the kernel only once
 * their output has gone quiet, and then with a backoff, so a thousand quiet sessions cost a
 * few small /proc reads a second, made off the event loop; a prompt-looking last line shortens
 * the quiet period. A tick visits the sessions due then (a schedule) and a bounded share of the
 * rest in turn, so its cost does not grow with the number of sessions held.
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
  private readonly schedule = new VisitSchedule(TICK_MS);
  /** Where the sweep is in the registry; a new pass starts once it is done. */
  private cursor: IterableIterator<Session> | undefined;
  /** Whether the timer runs (start, until stop). */
  private started = false;
  /** When the timer is set to tick (infinity: not set), when the last tick was, when the sweep goes on. */
  private armedAt = Number.POSITIVE_INFINITY;
  private lastTickAt = Number.NEGATIVE_INFINITY;
  private nextSweepAt = 0;
  /** In a tick, plans do not move the timer: the tick sets it for the earliest once done. */
  private ticking = false;

  constructor(
    private readonly registry: Registry,
    private readonly config: () => Config,
    private readonly log: Logger,
  ) {
    // A new session is planned for its first visit, not left for the sweep to find: at 1,000
    // sessions the sweep takes a second or two to come round.
    registry.onAdd((s) => {
      this.replan(s);
      s.quietRestarted = () => this.replan(s);
      // The sweep resumes with a live session (one not running yet is found by it once it runs).
      this.arm(this.nextSweepAt);
    });
  }

  /** Plan `s`'s next visit for when its current quiet period could first count. */
  private replan(s: Session): void {
    if (s.running && !this.stopped) this.plan(s.id, quietStart(s) + QUIET_MS.recognised);
  }

  /** Visit `id` at `at` (or at the first tick after it), the timer moved sooner if need be. */
  private plan(id: string, at: number): void {
    this.schedule.at(id, at);
    if (!this.ticking) this.arm(at);
  }

  /**
   * Set the timer for the first point of the TICK_MS grid at or after `at`, past the last tick's,
   * unless it is set sooner: ticks fall where a steady tick's would, so a visit waits no longer
   * than it did, and never come closer than TICK_MS.
   */
  private arm(at: number): void {
    if (!this.started) return;
    const when = Math.max(Math.ceil(at / TICK_MS) * TICK_MS, nextTick(this.lastTickAt));
    if (when >= this.armedAt) return;
    clearTimeout(this.timer);
    this.armedAt = when;
    // At most an hour ahead (a timer past 2^31 ms fires at once): a tick with nothing due sets it again.
    this.timer = setTimeout(this.fire, Math.min(Math.max(0, when - Date.now()), 3_600_000));
    this.timer.unref();
  }

  private readonly fire = () => {
    this.armedAt = Number.POSITIVE_INFINITY;
    this.timer = undefined;
    this.tick(Date.now());
  };

  start(): void {
    this.stopped = false;
    this.started = true;
    this.arm(Date.now());
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    this.armedAt = Number.POSITIVE_INFINITY;
    this.started = false;
    this.stopped = true;
    this.schedule.clear();
    this.cursor = undefined;
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
   * Visit the sessions due and the sweep's share of the rest; ask the kernel about the quiet
   * ones due for a look in one batch, off the event loop (see findStdinReaders). The answers are
   * applied when they come back, well before the next tick.
   */
  tick(now: number): void {
    const from = trace ? performance.now() : 0;
    const cfg = this.config().interrupt;
    const maxLooks = readsOffLoop() ? LOOKS_PER_TICK.offLoop : LOOKS_PER_TICK.onLoop;
    const looks: Look[] = [];
    this.ticking = true;
    try {
      for (const id of this.schedule.due(now)) {
        const s = this.registry.find(ALL_SCOPES, id);
        if (s) this.visit(s, now, cfg, looks, maxLooks);
      }
      if (now >= this.nextSweepAt) {
        this.sweep(now, cfg, looks, maxLooks);
        // With detection off a visit does nothing but expire interrupts (planned): the sweep only
        // looks for a reload that switched it on, every few seconds.
        this.nextSweepAt = relaxed(cfg.enabled ? now : now + SWEEP_DETECTION_OFF_MS);
      }
    } finally {
      // Whatever a visit threw, the next tick is set: the earliest visit planned, and the sweep's
      // next step while a session is live.
      this.ticking = false;
      this.lastTickAt = now;
      this.arm(Math.min(this.schedule.earliest(), this.cursor !== undefined || this.registry.hasLive() ? this.nextSweepAt : Number.POSITIVE_INFINITY));
    }
    if (looks.length > 0) this.look(looks, now);
    trace?.span('watcher tick', from, performance.now());
  }

  /** Visit the next sessions of the registry in turn, for a slice of the thread (SWEEP_SLICE_MS). */
  private sweep(now: number, cfg: Config['interrupt'], looks: Look[], maxLooks: number): void {
    this.cursor ??= this.registry.live();
    const sweepUntil = performance.now() + SWEEP_SLICE_MS;
    for (let n = 0; n < SWEEP_PER_TICK; n++) {
      if (n % SWEEP_CHECK === SWEEP_CHECK - 1 && performance.now() > sweepUntil) break;
      const next = this.cursor.next();
      if (next.done) {
        this.cursor = undefined;
        break;
      }
      this.visit(next.value, now, cfg, looks, maxLooks);
    }
  }

  /** One session: expire its interrupt, or take it into this tick's looks, or plan when to come back. */
  private visit(s: Session, now: number, cfg: Config['interrupt'], looks: Look[], maxLooks: number): void {
    // A paused session is frozen, not waiting: its quiet period starts again when it is continued.
    if (!s.running || s.paused) return;
    if (s.interrupt) {
      if (now >= s.interrupt.expiresAt) this.expire(s);
      else this.plan(s.id, s.interrupt.expiresAt);
      return;
    }
    if (!cfg.enabled || !s.stdinOpen) return;
    // Its process is still starting: come back once it could have gone quiet, not a sweep later.
    if (s.pid === undefined) return this.plan(s.id, now + QUIET_MS.recognised);
    if (!s.input) return;
    const quietSince = quietStart(s);
    const quiet = now - quietSince;
    if (quiet < QUIET_MS.recognised) return this.plan(s.id, quietSince + QUIET_MS.recognised);
    let st = this.state.get(s);
    if (!st || st.since !== quietSince) {
      st = { since: quietSince, backoff: 0, nextCheckAt: 0, seenReader: false, prompt: null, asked: false };
      this.state.set(s, st);
    }
    if (st.asked) return;
    if (now < st.nextCheckAt) return this.plan(s.id, st.nextCheckAt);
    if (st.prompt === null) st.prompt = looksLikePrompt(lastLine(s.output.tail(500)), this.extraPatterns());
    const prompt = st.prompt;
    const needed = QUIET_MS[prompt ?? 'none'];
    if (quiet < needed) return this.plan(s.id, quietSince + needed);
    // One batch out at a time, of a bounded size: the rest wait for the next tick.
    if (this.looking || looks.length >= maxLooks) return this.plan(s.id, nextTick(now));
    st.asked = true;
    looks.push({ session: s, state: st, since: quietSince, promptLike: prompt !== undefined });
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
        const from = trace ? performance.now() : 0;
        this.looking = false;
        if (!this.toldWhere) this.tellWhere();
        for (let i = 0; i < asked.length; i++) this.settle(asked[i], readers[i], now);
        trace?.span('watcher answers', from, performance.now());
      },
      (err) => {
        this.looking = false;
        // Looked at again after the shortest backoff, not left to the sweep (a pass takes seconds).
        for (const l of asked) {
          l.state.asked = false;
          this.plan(l.session.id, Date.now() + RECHECK_MIN_MS);
        }
        this.log.warn({ err }, 'could not look for sessions waiting for input');
      },
    );
  }

  /** The first answer in: where the looks ran is said once when it is not the idle thread. */
  private toldWhere = false;

  private tellWhere(): void {
    this.toldWhere = true;
    const where = lookThread();
    if (where?.state === 'pool') this.log.warn({ why: where.why }, 'the looks for sessions waiting for input run on the libuv pool: their own thread could not be made');
    else if (where?.state === 'thread' && where.policy !== 'idle' && where.policy !== 'normal') this.log.warn({ why: where.policy }, 'the looks for sessions waiting for input run on their own thread at normal priority: it could not be set to idle priority');
  }

  /** Whether the session moved on since it was looked at (output, input, an end, an interrupt). */
  private stale(l: Look): boolean {
    const s = l.session;
    return this.stopped || !this.config().interrupt.enabled || !s.running || s.interrupt !== undefined || !s.stdinOpen || this.state.get(s) !== l.state || quietStart(s) !== l.since;
  }

  /** What one look found: a reader seen on two looks in a row raises the interrupt. */
  private settle(l: Look, reader: StdinReader | undefined, now: number): void {
    const st = l.state;
    st.asked = false;
    // A look made stale by output or input meanwhile: the new quiet period is planned for, not left to the sweep.
    if (this.stale(l)) return this.replan(l.session);
    // Blocked in poll/select with the input as fd 0 is less certain: only with a prompt-looking line.
    if (reader !== undefined && (reader.how === 'read' || l.promptLike)) {
      if (!st.seenReader) {
        st.seenReader = true;
        this.plan(l.session.id, nextTick(now));
      } else {
        // No more looks in this quiet period: it is raised (or a new period starts).
        st.nextCheckAt = Number.POSITIVE_INFINITY;
        this.raising.push(l);
        if (this.raising.length === 1) setImmediate(() => this.raiseNext());
      }
    } else {
      st.seenReader = false;
      st.backoff = Math.min(RECHECK_MAX_MS, Math.max(RECHECK_MIN_MS, st.backoff * 2));
      // Jitter, so sessions started together do not stay in step and crowd one tick; a long
      // backoff's end on the grid, where the other quiet sessions' looks share its wake-up.
      st.nextCheckAt = now + st.backoff * (0.75 + Math.random() / 2);
      if (st.backoff >= RELAXED_FROM_MS) st.nextCheckAt = relaxed(st.nextCheckAt);
      this.plan(l.session.id, st.nextCheckAt);
    }
  }

  private raiseNext(): void {
    const l = this.raising.shift();
    if (l && !this.stale(l)) this.raise(l.session, this.extraPatterns(), this.config().interrupt.timeoutSeconds, Date.now());
    else if (l) this.replan(l.session);
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
    this.plan(s.id, interrupt.expiresAt);
    s.emit('waiting_input', { interrupt: interruptView(interrupt), tail: tail.slice(-500) });
    this.log.debug({ sessionId: s.id, kind: info.kind }, 'session waiting for input');
  }

  /** Unanswered in time: close the input (the command sees end of input) and record it. */
  private expire(s: Session): void {
    s.closeInput();
    s.settleInterrupt('expired');
    this.log.info({ sessionId: s.id }, 'interrupt expired; input closed');
  }
}
