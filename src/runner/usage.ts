import type { Resources } from '../cgroup/session.js';
import { trace } from '../base/trace.js';

/** How the held samples are kept fresh; tests shorten the times. */
export interface UsageTiming {
  /** A held sample is read again this often, while it is asked for. */
  everyMs: number;
  /** A sample nobody asked for in this many refreshes is let go. */
  idleRefreshes: number;
  /**
   * The same while refreshes are read on the samplers' thread, where a held sample costs the
   * daemon's thread nothing: kept longer, a client coming back after a pause finds its samples
   * fresh instead of read again a slice per turn on the daemon's thread (`hold`).
   */
  threadIdleRefreshes?: number;
  /**
   * A turn of the event loop that reads samples (a refresh, or the first reads of `hold`) stops
   * once it has read for this long, after its first sample; the next turn goes on. A request that
   * comes meanwhile waits for the turn, and on a loaded machine a few samples took long enough to
   * be the p99 of a thousand sessions' polls and pages (docs/benchmarks.md). A sample costs about
   * 0.1 ms on the bench's VM, so at 0.1 ms each turn is one sample. Without it, no bound.
   */
  sliceMs?: number;
  /**
   * The share of the daemon's thread the refreshes may take: after a refresh that read for T ms
   * the next starts no sooner than T / budget ms after it began (and never sooner than `everyMs`).
   */
  budget?: number;
  /** What the bench's trace calls its turns (base/trace.ts). */
  name?: string;
  /**
   * The share of one core a refresh read on the sampling thread may take (its own CPU time, not
   * the daemon's thread): after a batch that took T ms of CPU the next starts no sooner than
   * T / threadBudget ms after it began (and never sooner than `everyMs`).
   */
  threadBudget?: number;
}

/**
 * Where a sampler's refreshes are read when not on the daemon's thread: a batch of keys read
 * elsewhere (the sampling thread, runner/sample-thread.ts), each answer made a sample on this
 * thread when the batch comes back. `read` answers undefined when it cannot (no thread: then the
 * refresh reads here, a slice per turn, as before).
 */
export interface ReadElsewhere<K, V> {
  /**
   * Read `keys`, known there by `ids` (one number per held sample, new when a sample is held
   * anew); `fresh`: the indexes of those it was never sent, whose plans go with this batch. Every
   * held sample is in every batch: one left out is one let go.
   */
  read(keys: K[], ids: Int32Array, fresh: number[]): Promise<Batch<V>> | undefined;
}

/**
 * A batch read elsewhere: the CPU time its reads took there, and the sample of the key at each
 * index, made when asked: `held` itself when the figures did not move (nothing made), undefined
 * when none was read (the held one stays).
 */
export interface Batch<V> {
  cpuMs: number;
  sample(index: number, held: V): V | undefined;
}

/**
 * The daemon's samplers (cgroup usage, runner/cgroup.ts; listening ports, runner/ports.ts) share
 * 5% of its thread where they read on it, and a quarter of a core on the samplers' thread: each is
 * given its part of both.
 */
export function samplerTiming(budget: number, name?: string, threadBudget?: number): UsageTiming {
  return { everyMs: 1000, idleRefreshes: 3, threadIdleRefreshes: 30, sliceMs: 0.1, budget, name, threadBudget };
}

const TIMING = samplerTiming(0.05, 'sampler');

/** A refresh read elsewhere that is not back within this many refreshes' time is read here instead. */
const LATE_REFRESHES = 3;

/**
 * Once no sample has been asked for in `idleRefreshes` refreshes, the samples the samplers'
 * thread keeps (up to `threadIdleRefreshes`) are read only at every this many refreshes: a client
 * back after a pause still finds them held, at most this many seconds old, and a daemon nobody
 * asks anything does not read a thousand sessions' files every second for half a minute (5% of a
 * core on the bench's VM, against the idle target of 5% for the whole daemon).
 */
const UNASKED_EVERY = 5;

/** First reads `hold` makes in one turn of the event loop, at most (and no more than a slice's worth). */
const FIRST_AT_ONCE = 16;

/**
 * What `hold` walks: an array or a Set of keys, or the session registry. Walked with
 * `forEach`, which makes nothing per key where a `for…of` the optimizer does not inline makes an
 * iterator result per key.
 */
export interface Walkable<K> {
  forEach(visit: (key: K) => void): void;
}

interface Held<V> {
  value: V;
  /** The refresh count when it was last asked for. */
  asked: number;
  /** Its number for the samplers' thread (none until its first batch there). */
  id?: number;
}

/**
 * What running sessions use, from one sample per session that the sampler holds (SPEC §15):
 * the first ask reads it, and while anyone keeps asking (list, poll, daemon.status) every held
 * sample is read again once per `everyMs`, off the requests, a slice of the thread per turn of the event loop.
 * Reading a session's cgroup costs tens of microseconds (cpu.stat, cgroup.procs, each member's
 * memory), so a list of a thousand sessions that read them all on every call cost more than
 * the answer itself. A sample unasked for a few refreshes is let go, and with none held no
 * timer runs. The ports sessions listen on are held the same way (runner/ports.ts).
 *
 * The refreshes keep to a budget of the thread (`budget`): with a thousand sessions on a busy
 * machine, reading every cgroup took a third of a core when done once a second, so the next
 * refresh waits until the reads of the last fit in the budget, and samples are that much older.
 *
 * Given somewhere else to read them (`elsewhere`: the samplers' thread, at idle priority), the
 * refreshes are read there, a batch each, and this thread only puts each batch's samples in, in
 * one turn; their budget is then of that thread's core (`threadBudget`), and a sample unasked is
 * kept longer (`threadIdleRefreshes`). First reads stay here: the request that asks waits for them.
 */
export class UsageSampler<K, V = Resources> {
  private readonly held = new Map<K, Held<V>>();
  private timer: NodeJS.Timeout | undefined;
  private refreshes = 0;
  private refreshing = false;
  /** The last refresh was read elsewhere. */
  private elsewhereOk = false;
  private nextId = 1;
  /** The refresh count when every held sample was last asked for at once (`askAll`). */
  private allAsked = -1;
  /** Samples read so far, first asks and refreshes alike. */
  reads = 0;
  /**
   * Counts every change to what is held: a key held or let go, a sample made anew. While it
   * stays the same, a figure made from the held samples (daemon.status's totals) stays true.
   */
  version = 0;

  constructor(
    /** Read one key's figures now. */
    private readonly read: (key: K) => V,
    /** Whether a key is still worth sampling (its session runs). */
    private readonly live: (key: K) => boolean,
    private readonly timing: UsageTiming = TIMING,
    /**
     * Whether a new read says the same as the held sample: then the held one stays, the same
     * object. Readers that keep what they made from a sample (process list keeps its answer
     * while every sample of it is the one it was made from) then make nothing again for a
     * session whose figures did not move, which is most of a thousand quiet sessions.
     */
    private readonly same?: (held: V, read: V) => boolean,
    /** Where refreshes are read, when not here. */
    private readonly elsewhere?: ReadElsewhere<K, V>,
  ) {}

  /** The held sample of `key` (read now when none is held), at most about `everyMs` old (UNASKED_EVERY refreshes after a spell nobody asked for any). */
  of(key: K): V {
    let h = this.held.get(key);
    if (h === undefined) {
      h = { value: this.readOne(key), asked: this.refreshes };
      this.held.set(key, h);
      this.version++;
      this.start();
    } else h.asked = this.refreshes;
    return h.value;
  }

  /**
   * Count every held sample as asked for now, without a walk: a reader of them all (the running
   * totals of daemon.status) that knows nothing changed since it last held each (`version`).
   */
  askAll(): void {
    this.allAsked = this.refreshes;
  }

  /**
   * Hold a sample of each of `keys` that `want`s one, reading those not held yet: up to
   * `FIRST_AT_ONCE` now, more a slice (`sliceMs`) per turn of the event loop (undefined when none
   * had to wait, else a promise that resolves once all are read). A list of a thousand sessions
   * asked for after a quiet spell (every sample let go) read them all at once, ~1,600 files in
   * one turn, holding every other client's request behind it; this way its answer waits, not
   * theirs. (Sixteen a turn held the thread 1.5-2 ms a turn at 1,000 sessions: a slice now.)
   */
  hold(keys: Walkable<K>, want: (key: K) => boolean = () => true): Promise<void> | undefined {
    // Assigned in the walk's callback, which the compiler's narrowing does not follow.
    let missing = undefined as K[] | undefined;
    keys.forEach((key) => {
      if (!want(key)) return;
      const h = this.held.get(key);
      if (h !== undefined) h.asked = this.refreshes;
      else (missing ??= []).push(key);
    });
    if (missing === undefined) return undefined;
    if (missing.length <= FIRST_AT_ONCE) {
      for (const key of missing) this.of(key);
      return undefined;
    }
    const list = missing;
    return new Promise((resolve) => {
      let next = 0;
      const turn = () => {
        const from = performance.now();
        const until = from + (this.timing.sliceMs ?? Infinity);
        const end = Math.min(next + FIRST_AT_ONCE, list.length);
        do {
          // One found ended meanwhile is read no more (its final figures are the session's).
          if (this.live(list[next])) this.of(list[next]);
          next++;
        } while (next < end && performance.now() < until);
        trace?.span(`${this.timing.name ?? 'sampler'} first reads`, from, performance.now());
        if (next < list.length) setImmediate(turn);
        else resolve();
      };
      turn();
    });
  }

  /** The sample held for `key`, if any, without reading or counting it as asked for. */
  peek(key: K): V | undefined {
    return this.held.get(key)?.value;
  }

  /**
   * Hold `value` as `key`'s sample, read elsewhere: a restarted image takes the samples the image
   * before it held (daemon/handover), rather than read every running session's cgroup again a
   * slice per turn before its first `daemon.status` or `list` can answer. Refreshed as any other.
   */
  seed(key: K, value: V): void {
    if (this.held.has(key)) return;
    this.held.set(key, { value, asked: this.refreshes });
    this.version++;
    this.start();
  }

  /**
   * Moves whenever `version` does and whenever a refresh begins (after which an ask marks a
   * sample anew): equal to one taken before, every sample held then is held now, the same, and
   * counted as asked for in this refresh if it was then. (Both counts only grow: their sum moves
   * whenever either does.)
   */
  get mark(): number {
    return this.version + this.refreshes;
  }

  /** Whether its refresh timer runs (only while samples are held). */
  get active(): boolean {
    return this.timer !== undefined;
  }

  /** How many samples are held now. */
  get size(): number {
    return this.held.size;
  }

  /** Let go of every sample and stop the timer (daemon shutdown). */
  close(): void {
    this.held.clear();
    this.version++;
    this.stop();
  }

  private readOne(key: K): V {
    this.reads++;
    return this.read(key);
  }

  private start(): void {
    if (this.timer !== undefined) return;
    this.schedule(this.timing.everyMs);
  }

  /** The next refresh in `ms` (the timer stays set while a refresh reads, so `active` holds). */
  private schedule(ms: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.refresh(), ms);
    this.timer.unref();
  }

  private stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** Read again every sample still asked for, a slice per turn; let go of the rest. */
  private refresh(): void {
    if (this.refreshing) return;
    this.refreshes++;
    const keys: K[] = [];
    const idle = this.elsewhereOk ? (this.timing.threadIdleRefreshes ?? this.timing.idleRefreshes) : this.timing.idleRefreshes;
    let lastAsked = -1;
    for (const [key, h] of this.held) {
      const asked = Math.max(h.asked, this.allAsked);
      if (this.refreshes - asked > idle || !this.live(key)) {
        this.held.delete(key);
        this.version++;
      } else {
        keys.push(key);
        if (asked > lastAsked) lastAsked = asked;
      }
    }
    if (this.held.size === 0) return this.stop();
    const unasked = this.refreshes - lastAsked;
    if (unasked > this.timing.idleRefreshes && unasked % UNASKED_EVERY !== 0) return this.schedule(this.timing.everyMs);
    this.refreshing = true;
    const began = performance.now();
    const batch = this.elsewhere === undefined || this.late ? undefined : this.sendElsewhere(keys);
    this.elsewhereOk = batch !== undefined;
    if (batch !== undefined) {
      trace?.span(`${this.timing.name ?? 'sampler'} send`, began, performance.now());
      // A batch not back in LATE_REFRESHES refreshes' time (the thread starved of the CPU, or stuck
      // in a read) does not hold the samples still: this refresh is read here, and every one after
      // it until the batch comes back, whose answer is then dropped.
      let over = false;
      const deadline = setTimeout(() => {
        over = true;
        this.late = true;
        trace?.span(`${this.timing.name ?? 'sampler'} late`, began, performance.now());
        this.readHere(keys, began);
      }, this.timing.everyMs * LATE_REFRESHES);
      deadline.unref();
      void batch.then(
        (b) => {
          clearTimeout(deadline);
          if (over) this.late = false;
          else this.take(keys, b, began);
        },
        // The thread is gone (sample-thread.ts says so once): this refresh and the next read here.
        () => {
          clearTimeout(deadline);
          this.late = false;
          this.elsewhereOk = false;
          // Their plans may not have reached the thread: each is sent again with the next batch.
          for (const key of keys) {
            const h = this.held.get(key);
            if (h) h.id = undefined;
          }
          if (!over) this.readHere(keys, began);
        },
      );
      return;
    }
    this.readHere(keys, began);
  }

  /** A batch read elsewhere is out past its deadline: refreshes read here until it comes back. */
  private late = false;

  /** Hand a refresh's keys to be read elsewhere, each known by its number there. */
  private sendElsewhere(keys: K[]): Promise<Batch<V>> | undefined {
    const ids = new Int32Array(keys.length);
    const fresh: number[] = [];
    for (let i = 0; i < keys.length; i++) {
      const h = this.held.get(keys[i])!;
      if (h.id === undefined) {
        h.id = this.nextId++;
        fresh.push(i);
      }
      ids[i] = h.id;
    }
    return this.elsewhere!.read(keys, ids, fresh);
  }

  /** Read a refresh's keys on this thread, a slice per turn, and put the samples in together at the end. */
  private readHere(keys: K[], began: number): void {
    let spentMs = 0;
    let next = 0;
    // The new samples are held back and put in together at the end: readers see one refresh at
    // a time, not a few samples changing on every turn (process list keeps its answer while no
    // sample of it changed, tools/process/list.ts).
    const read: (V | undefined)[] = [];
    const turn = () => {
      const from = performance.now();
      const until = from + (this.timing.sliceMs ?? Infinity);
      let now = from;
      do {
        // A key found gone or ended meanwhile keeps the sample it had.
        if (this.live(keys[next]) && this.held.has(keys[next])) read[next] = this.readOne(keys[next]);
        next++;
        now = performance.now();
      } while (next < keys.length && now < until);
      spentMs += now - from;
      trace?.span(`${this.timing.name ?? 'sampler'} refresh`, from, now);
      if (next < keys.length && this.timer !== undefined) return void setImmediate(turn);
      this.refreshing = false;
      if (this.timer !== undefined) {
        const budget = this.timing.budget ?? 1;
        this.schedule(Math.max(this.timing.everyMs, spentMs / budget) - (performance.now() - began));
      }
      for (let i = 0; i < next; i++) {
        const h = this.held.get(keys[i]);
        const value = read[i];
        if (h !== undefined && value !== undefined && value !== h.value && !this.same?.(h.value, value)) {
          h.value = value;
          this.version++;
        }
      }
    };
    turn();
  }

  /** A refresh read elsewhere is back: its samples put in, in this one turn; the next refresh scheduled within the thread's budget. */
  private take(keys: K[], batch: Batch<V>, began: number): void {
    this.refreshing = false;
    if (this.timer === undefined) return;
    const from = performance.now();
    const budget = this.timing.threadBudget ?? 1;
    this.schedule(Math.max(this.timing.everyMs, batch.cpuMs / budget) - (from - began));
    for (let i = 0; i < keys.length; i++) {
      const h = this.held.get(keys[i]);
      // A key found gone or ended meanwhile keeps the sample it had.
      if (h === undefined || !this.live(keys[i])) continue;
      const value = batch.sample(i, h.value);
      if (value === undefined) continue;
      this.reads++;
      if (value !== h.value && !this.same?.(h.value, value)) {
        h.value = value;
        this.version++;
      }
    }
    trace?.span(`${this.timing.name ?? 'sampler'} take`, from, performance.now());
  }
}
