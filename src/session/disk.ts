/** Whether the state directory takes writes now (SPEC §10): `daemon.status.state`. */
export interface DiskState {
  writable: boolean;
  /** The last write that failed, while the directory does not take writes. */
  error?: string;
}

/**
 * The state directory's health, as every write there finds it. A fault is told once when it
 * starts and once when writes succeed again, never once per write: a full disk under a thousand
 * chatty sessions is one log line, not a million.
 */
export class DiskHealth {
  private fault: string | undefined;

  constructor(private readonly told: (state: DiskState, what?: string) => void = () => undefined) {}

  get state(): DiskState {
    return this.fault === undefined ? { writable: true } : { writable: false, error: this.fault };
  }

  get writable(): boolean {
    return this.fault === undefined;
  }

  /** A write failed: `what` says which (a session record, a spool). */
  failed(err: Error, what: string): void {
    const first = this.fault === undefined;
    this.fault = err.message;
    if (first) this.told(this.state, what);
  }

  /** A write succeeded. */
  succeeded(): void {
    if (this.fault === undefined) return;
    this.fault = undefined;
    this.told(this.state);
  }
}
