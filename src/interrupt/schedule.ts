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

  /** The ids due at `now`, each once, taken off the schedule. */
  due(now: number): string[] {
    const out: string[] = [];
    const last = Math.floor(now / this.bucketMs);
    for (const [k, ids] of this.buckets) {
      if (k > last) continue;
      const later: string[] = [];
      for (const id of ids) {
        const at = this.planned.get(id);
        if (at === undefined || Math.floor(at / this.bucketMs) !== k) continue; // moved, or already taken
        if (at <= now) {
          this.planned.delete(id);
          out.push(id);
        } else later.push(id);
      }
      if (later.length > 0) this.buckets.set(k, later);
      else this.buckets.delete(k);
    }
    return out;
  }

  /** How many visits are planned. */
  get size(): number {
    return this.planned.size;
  }

  clear(): void {
    this.buckets.clear();
    this.planned.clear();
  }
}
