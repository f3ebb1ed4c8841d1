/** Whether the state directory takes writes now (SPEC §10): `daemon.status.state`. */
export interface DiskState {
  writable: boolean;
  /** The last write that failed, while the directory does not take writes. */
  error?: string;
}

/**
 * What a write needs of the state directory: `file`, to make, rename or delete a file in it (a
 * record, a spool, the journal's first line); `data`, to add to a file it already has (a journal
 * line, output to an open spool). A read-only directory refuses the first and takes the second.
 * `dir`: to make a directory in the state directory itself (the review probe's), which a
 * read-only sessions directory does not refuse.
 */
export type WriteKind = 'file' | 'data' | 'dir';

/**
 * The state directory's health, as every write there finds it. It does not take writes while a
 * kind of write failed and none of that kind succeeded since: a line appended to the journal
 * says nothing of whether a spool can be made. A fault is told once when it starts and once when
 * writes succeed again, never once per write: a full disk under a thousand chatty sessions is
 * one log line, not a million.
 */
export class DiskHealth {
  /** The last error of each kind of write that fails now, newest last. */
  private readonly faults = new Map<WriteKind, string>();

  constructor(private readonly told: (state: DiskState, what?: string) => void = () => undefined) {}

  get state(): DiskState {
    const newest = [...this.faults.values()].at(-1);
    return newest === undefined ? { writable: true } : { writable: false, error: newest };
  }

  get writable(): boolean {
    return this.faults.size === 0;
  }

  /** A write of this kind failed: `what` says which (a session record, a spool). */
  failed(kind: WriteKind, err: Error, what: string): void {
    const first = this.faults.size === 0;
    this.faults.delete(kind);
    this.faults.set(kind, err.message);
    if (first) this.told(this.state, what);
  }

  /** A write of this kind succeeded. */
  succeeded(kind: WriteKind): void {
    if (!this.faults.delete(kind) || this.faults.size > 0) return;
    this.told(this.state);
  }
}
