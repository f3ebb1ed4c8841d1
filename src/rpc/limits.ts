/** What one user's connections may hold of the daemon together (SPEC §4: no client starves the rest). */
export interface ClientLimits {
  /** Connections open at once per uid. */
  connectionsPerUid: number;
  /** Bytes of incomplete frames held at once per uid. */
  partialBytesPerUid: number;
  /** A connection holding an incomplete frame this long without a byte more is closed. */
  partialFrameTimeoutMs: number;
}

/** The requests of one batch at most: more is one -32600 for the whole batch (its requests can be sent as lines, pipelined). */
export const MAX_BATCH = 100;
/** How deep params may nest (objects and arrays); deeper is invalid params, never a stack overflow. */
export const MAX_PARAMS_DEPTH = 64;

/** A connection's place in its user's budget: given back once, whichever comes first of its refusal and its close. */
export interface Slot {
  readonly uid: number;
  release(): void;
}

/** Per-uid accounting of connections and of bytes held in incomplete frames. */
export class ClientBudget {
  private readonly connections = new Map<number, number>();
  private readonly partial = new Map<number, number>();

  constructor(public limits: ClientLimits) {}

  /** Take a connection for `uid`; undefined when it already has as many as it may. */
  admit(uid: number): Slot | undefined {
    const n = this.connections.get(uid) ?? 0;
    if (n >= this.limits.connectionsPerUid) return undefined;
    this.connections.set(uid, n + 1);
    let held = true;
    return {
      uid,
      release: () => {
        if (!held) return;
        held = false;
        this.release(uid);
      },
    };
  }

  private release(uid: number): void {
    const n = (this.connections.get(uid) ?? 1) - 1;
    if (n <= 0) this.connections.delete(uid);
    else this.connections.set(uid, n);
  }

  /** A connection of `uid` now holds `delta` more (or fewer) bytes of an incomplete frame; false when that puts the uid over its budget. */
  holdPartial(uid: number, delta: number): boolean {
    const n = Math.max(0, (this.partial.get(uid) ?? 0) + delta);
    if (n === 0) this.partial.delete(uid);
    else this.partial.set(uid, n);
    return n <= this.limits.partialBytesPerUid;
  }
}

/** Does `value` nest deeper than `max` (objects and arrays)? Walked no more than `max` levels down, so never a stack overflow. */
export function nestsDeeper(value: unknown, max: number): boolean {
  if (typeof value !== 'object' || value === null) return false;
  if (max <= 0) return true;
  // No deeper than `max` calls: a value nested past it is found there, not followed further.
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (nestsDeeper(value[i], max - 1)) return true;
    return false;
  }
  for (const key in value) if (nestsDeeper((value as Record<string, unknown>)[key], max - 1)) return true;
  return false;
}
