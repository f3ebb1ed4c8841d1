/**
 * When sessions are next due for a visit from the interrupt watcher. Kept by session id, not by
 * session, so a forgotten session is never held here; in buckets of one tick, so a tick takes
 * what is due without looking at the rest.
 */
export class VisitSchedule {
  /** Ids by bucket (`floor(at / bucketMs)`); an id whose planned time moved is skipped there. */
  private readonly buckets = new Map<number, string[]>();
  private readonly planned = new Map<string, number>();

  constructor(private readonly bucketMs: number) {}

  /** Visit `id` at the first tick at or after `at`; a visit planned earlier stands. */
  at(id: string, at: number): void {
    if (!Number.isFinite(at)) return;
    const before = this.planned.get(id);
    if (before !== undefined && before <= at) return;
    this.planned.set(id, at);
    const k = Math.floor(at / this.bucketMs);
    const bucket = this.buckets.get(k);
    if (bucket) bucket.push(id);
    else this.buckets.set(k, [id]);
  }

  /**
   * The ids due at `now`, each once, taken off the schedule. The array is this schedule's own,
   * made again by the next call: the watcher asks twenty times a second, and walked its buckets
   * as `[key, ids]` pairs made for each (tens of buckets), with a new array for what stays.
   */
  due(now: number): readonly string[] {
    const out = this.taken;
    out.length = 0;
    const last = Math.floor(now / this.bucketMs);
    this.buckets.forEach((ids, k) => {
      if (k > last) return;
      // What stays in the bucket is moved to its front, in place.
      let kept = 0;
      for (let i = 0; i < ids.length; i++) {
        const id = ids[i];
        const at = this.planned.get(id);
        if (at === undefined || Math.floor(at / this.bucketMs) !== k) continue; // moved, or already taken
        if (at <= now) {
          this.planned.delete(id);
          out.push(id);
        } else ids[kept++] = id;
      }
      if (kept > 0) ids.length = kept;
      else this.buckets.delete(k);
    });
    return out;
  }

  /** What `due` answers, used again at each call. */
  private readonly taken: string[] = [];

  /** How many visits are planned. */
  get size(): number {
    return this.planned.size;
  }

  clear(): void {
    this.buckets.clear();
    this.planned.clear();
  }
}
