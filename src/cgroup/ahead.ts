import { mkdir } from 'node:fs';
import { removeDir } from './files.js';
import type { CgroupLayout } from './host.js';
import { SessionCgroup, type SessionLimits } from './session.js';

/** Cgroups kept made, each under the id the next sessions will have. */
const SPARE = 2;

/**
 * Session cgroups made before their sessions are asked for, so an exec makes no directory on its
 * way to the spawn: a cgroup's mkdir took 30-45 µs of the daemon's thread there (docs/benchmarks.md,
 * the exec round trip). Each is made under a session id drawn ahead (a cgroup is named after its
 * session, as the guardian and the next start find it), off the main thread, after the turn that
 * took one. Only a session that lives in its v2 directory alone takes one (no v1 hierarchy to join
 * for its limits; the v2 limits are written when it is taken). Left when the daemon stops
 * (`close`), or a crash: the next start removes every session cgroup no handed-over session owns.
 */
export class CgroupsAhead {
  private readonly spare: string[] = [];
  /** Taken, and neither started in (`used`) nor dropped yet: a start that threw leaves one here, for `close`. */
  private readonly lent = new Set<string>();
  private filling = 0;
  private refillTurn: NodeJS.Immediate | undefined;
  private closed = false;
  /** Told once no mkdir is in flight (close waits for them). */
  private settled: (() => void)[] = [];

  constructor(
    private readonly layout: CgroupLayout,
    /** A new session id (the registry's: none of its sessions has it). */
    private readonly newId: () => string,
    /** Whether a session has this id by now (drawn ahead, it may have been drawn again since). */
    private readonly taken: (id: string) => boolean,
  ) {}

  /**
   * The id of a session whose cgroup's v2 directory is made (SessionCgroup.madeAhead takes it,
   * or `drop` when the session is refused before it is started); undefined when these limits need
   * a v1 hierarchy, or none is ready (the caller makes one, as before).
   */
  take(limits: SessionLimits): string | undefined {
    if (this.closed || !SessionCgroup.v2Only(this.layout, limits)) return undefined;
    let id: string | undefined;
    while ((id = this.spare.pop()) !== undefined && this.taken(id)) removeDir(SessionCgroup.v2Dir(this.layout, id)!);
    // Made again once this turn is over (the job has started by then): handing work to a thread wakes it.
    this.refillTurn ??= setImmediate(() => {
      this.refillTurn = undefined;
      this.refill();
    });
    if (id !== undefined) this.lent.add(id);
    return id;
  }

  /** A taken cgroup its session now lives in: the session's to remove, as any session's cgroup. */
  used(id: string): void {
    this.lent.delete(id);
  }

  /** A taken cgroup its session never used (refused before its start): removed. */
  drop(id: string): void {
    this.lent.delete(id);
    removeDir(SessionCgroup.v2Dir(this.layout, id)!);
  }

  /** Make the spare cgroups, off the main thread (at start-up, and after each taken). */
  refill(): void {
    if (!this.layout.v2) return;
    while (!this.closed && this.spare.length + this.filling < SPARE) {
      this.filling++;
      const id = this.newId();
      const dir = SessionCgroup.v2Dir(this.layout, id)!;
      mkdir(dir, (err) => {
        this.filling--;
        if (!err && this.closed) removeDir(dir);
        else if (!err) this.spare.push(id);
        if (this.filling === 0) for (const told of this.settled.splice(0)) told();
      });
    }
  }

  /** Remove the spare cgroups and make no more (a shutdown, before the daemon's own cgroup goes): settles once none is left. */
  close(): Promise<void> {
    this.closed = true;
    clearImmediate(this.refillTurn);
    for (const id of [...this.spare.splice(0), ...this.lent]) removeDir(SessionCgroup.v2Dir(this.layout, id)!);
    this.lent.clear();
    return this.filling === 0 ? Promise.resolve() : new Promise((resolve) => this.settled.push(resolve));
  }

  /** How many are made and not taken (for tests). */
  get ready(): number {
    return this.spare.length;
  }
}
