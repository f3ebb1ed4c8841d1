/**
 * When sessions are next due for a visit from the interrupt watcher. Kept by session id, not by
 * session, so a forgotten session is never held here; in buckets of one tick, so a tick takes
 * what is due without looking at the rest.
 */
export class VisitSchedule {
  /** Ids by bucket (`floor(at / bucketMs)`); an id whose planned time moved is skipped there. */
  private readonly buckets = new Map<number, string[]>();
  private readonly planned = new Map<string, number>();
  /**
   * The buckets' keys, a min-heap: a tick takes the buckets due from its top and never looks at
   * the rest. Walking every bucket at every tick cost tens of microseconds with a thousand
   * sessions (their interrupts' expiries are hours away, each in a bucket of its own), on a
   * thread whose caches the requests between two ticks have emptied.
   */
  private readonly keys: number[] = [];

  constructor(private readonly bucketMs: number) {}

  /** Visit `id` at the first tick at or after `at`; a visit planned earlier stands. */
  at(id: string, at: number): void {
    if (!Number.isFinite(at)) return;
    const before = this.planned.get(id);
    if (before !== undefined && before <= at) return;
    this.planned.set(id, at);
    this.put(Math.floor(at / this.bucketMs), id);
  }

  private put(k: number, id: string): void {
    const bucket = this.buckets.get(k);
    if (bucket) bucket.push(id);
    else {
      this.buckets.set(k, [id]);
      heapPush(this.keys, k);
    }
  }

  /**
   * The ids due at `now`, each once, taken off the schedule. The array is this schedule's own,
   * made again by the next call: the watcher asks twenty times a second.
   */
  due(now: number): readonly string[] {
    const out = this.taken;
    out.length = 0;
    const last = Math.floor(now / this.bucketMs);
    let later: string[] | undefined;
    while (this.keys.length > 0 && this.keys[0] <= last) {
      const k = heapPop(this.keys);
      const ids = this.buckets.get(k)!;
      this.buckets.delete(k);
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i];
        const at = this.planned.get(id);
        if (at === undefined || Math.floor(at / this.bucketMs) !== k) continue; // moved, or already taken
        if (at <= now) {
          this.planned.delete(id);
          out.push(id);
        } else (later ??= []).push(id); // in this tick's bucket, a little after now
      }
    }
    if (later) for (const id of later) this.put(last, id);
    return out;
  }

  /** What `due` answers, used again at each call. */
  private readonly taken: string[] = [];

  /**
   * When the first visit planned is due (infinity when none is): the earliest time planned in
   * the first bucket, or that bucket's start when each of its ids has moved (the tick that finds
   * it empty takes it off).
   */
  earliest(): number {
    if (this.keys.length === 0) return Number.POSITIVE_INFINITY;
    const k = this.keys[0];
    let first = Number.POSITIVE_INFINITY;
    for (const id of this.buckets.get(k)!) {
      const at = this.planned.get(id);
      if (at !== undefined && Math.floor(at / this.bucketMs) === k && at < first) first = at;
    }
    return first === Number.POSITIVE_INFINITY ? k * this.bucketMs : first;
  }

  /** How many visits are planned. */
  get size(): number {
    return this.planned.size;
  }

  clear(): void {
    this.buckets.clear();
    this.planned.clear();
    this.keys.length = 0;
  }
}

function heapPush(heap: number[], k: number): void {
  let i = heap.push(k) - 1;
  while (i > 0) {
    const up = (i - 1) >> 1;
    if (heap[up] <= k) break;
    heap[i] = heap[up];
    i = up;
  }
  heap[i] = k;
}

function heapPop(heap: number[]): number {
  const top = heap[0];
  const end = heap.pop()!;
  if (heap.length === 0) return top;
  let i = 0;
  for (;;) {
    const l = 2 * i + 1;
    if (l >= heap.length) break;
    const c = l + 1 < heap.length && heap[l + 1] < heap[l] ? l + 1 : l;
    if (heap[c] >= end) break;
    heap[i] = heap[c];
    i = c;
  }
  heap[i] = end;
  return top;
}
