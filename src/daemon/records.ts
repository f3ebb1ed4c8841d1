import type { Logger } from 'pino';
import type { Config } from '../config/schema.js';
import { terminate } from '../runner/group.js';
import { reapChild } from '../runner/native.js';
import { readStat } from '../runner/procfs.js';
import { findSessionProcesses } from '../runner/sweep.js';
import type { RecordKeeper, ShellCommandKept } from '../session/keeper.js';
import { isEnded, isPendingApproval, restoreSession, toRecord } from '../session/persist.js';
import type { Registry } from '../session/registry.js';
import type { Session } from '../session/session.js';
import { Spool } from '../session/spool.js';
import type { GuardianLink } from './guardian-link.js';
import type { StateStore } from './state.js';

/** A running session's first record is written this long after it starts, if it still runs. */
const FIRST_RECORD_MS = 100;
/** How long a turn the records and guardian copies of sessions a restart handed over are written for, before requests are read again. */
const AFTER_SERVING_SLICE_MS = 2;

/**
 * Sessions' records (SPEC §10): written when a session starts to matter (it runs on, it waits for
 * an approval) and whenever it changes, after the answer once it ended; and read back at start,
 * where what was running is recovered as lost.
 */
export class Records implements RecordKeeper {
  constructor(
    private readonly state: StateStore,
    private readonly registry: Registry,
    private readonly guardian: GuardianLink,
    private readonly log: Logger,
  ) {}

  /** The sessions a planned restart handed over, whose record and guardian's copy are given again once this image serves. */
  private handedOver: { id: string; run: () => void }[] = [];

  watch(session: Session, opts: { now?: boolean; shell?: ShellCommandKept; handedOver?: { startTime?: number } } = {}): void {
    if (session.pid !== undefined) this.guardian.add(session.id, session.pid);
    // The leader's start time (to tell it from a reused pid at recovery) matters only in the record
    // of a session that runs on: read when that is first written, not at the spawn, where reading
    // a process's stat waits for its exec to finish. A session handed over carries it in its record.
    let startTime: number | undefined;
    let looked = false;
    const leaderStart = (): number | undefined => {
      if (!looked && session.pid !== undefined && session.running) {
        looked = true;
        startTime = opts.handedOver?.startTime ?? readStat(session.pid)?.startTime;
        if (startTime !== undefined) {
          this.guardian.started(session.id, session.pid, startTime);
          this.guardian.keep(session, opts.shell ? { command: opts.shell } : undefined);
        }
      }
      return startTime;
    };
    // A command that is over in a moment needs only its final record; one that runs on is written
    // soon, and at once when it changes (an exec answering that it still runs marks it backgrounded).
    let early: NodeJS.Timeout | undefined;
    const save = () => {
      clearTimeout(early);
      this.state.save(toRecord(session, leaderStart()));
    };
    session.recordWith(save);
    if (opts.now) save();
    else if (opts.handedOver) {
      // Its record is on disk as the old image wrote it at the hand-over, the guardian's slot and
      // descriptors are the old image's: the same as what would be written now. Written again
      // once this image serves (or at the session's first change), not while no client is answered.
      this.handedOver.push({
        id: session.id,
        run: () => {
          if (session.running && !looked) save();
        },
      });
    } else {
      early = setTimeout(save, FIRST_RECORD_MS);
      early.unref();
    }
    void session.finished.then(async () => {
      clearTimeout(early);
      // Finished: the record is made and written after this turn, so exec answers without waiting
      // for it; the guardian's slot is let go then too (its process is gone, reaped: nothing to protect).
      const saveLater = () => this.state.saveLater(session.id, () => toRecord(session, startTime));
      session.recordWith(saveLater);
      saveLater();
      setImmediate(() => this.guardian.remove(session.id));
      // A rotation still in flight can change what the spool dropped: then say so once more,
      // unless the session was forgotten meanwhile (its files are gone and must stay gone).
      const dropped = session.spool?.droppedBytes;
      await session.spool?.close();
      if (session.spool?.droppedBytes !== dropped && this.registry.has(session.id)) saveLater();
    });
  }

  guard(session: Session, describe: () => unknown): void {
    const pid = session.pid;
    if (pid === undefined || !session.running) return;
    this.guardian.add(session.id, pid);
    const startTime = readStat(pid)?.startTime;
    if (startTime !== undefined) {
      this.guardian.started(session.id, pid, startTime);
      this.guardian.keep(session, { shell: { state: describe(), record: toRecord(session, startTime) } });
    }
    void session.finished.then(() => setImmediate(() => this.guardian.remove(session.id)));
  }

  /**
   * This image serves: the sessions handed to it get their record written and their descriptors
   * sent to the guardian again, as any session's first record does (watch `handedOver`), a slice
   * of a few milliseconds a turn, so the requests that waited for the new image are read and
   * answered between the slices rather than after all of them; `then` once every one is done.
   */
  afterServing(then?: () => void): void {
    const pending = this.handedOver;
    this.handedOver = [];
    let next = 0;
    const slice = () => {
      const until = performance.now() + AFTER_SERVING_SLICE_MS;
      while (next < pending.length) {
        const { id, run } = pending[next++];
        // One that throws (a record that cannot be written, a guardian gone) does not hold up the rest, nor `then`.
        try {
          run();
        } catch (err) {
          this.log.error({ sessionId: id, err: (err as Error).message }, 'a session handed over by the restart could not be recorded or kept again; the others go on');
        }
        if (performance.now() >= until) break;
      }
      if (next < pending.length) setImmediate(slice);
      else then?.();
    };
    slice();
  }

  hold(session: Session): void {
    const save = () => (session.endedAt === undefined ? this.state.save(toRecord(session)) : this.state.saveLater(session.id, () => toRecord(session)));
    session.recordWith(save);
    save();
  }

  /**
   * Load the records of the last run: finished sessions answer as before; sessions that were
   * running are terminated (only if their recorded leader is still the same process) and
   * marked failed with reason "lost". Sessions waiting for their approval still wait (their
   * expiry counts on from when they were asked): `pending` is told of each.
   */
  recover(config: Config, pending: (s: Session) => void, opts: { adopted?: ReadonlySet<string>; lostWhy?: string | ((id: string) => string); spare?: ReadonlySet<number> } = {}): Map<string, Promise<unknown>> {
    // Sessions a planned restart handed to this image run on: their records are theirs (SPEC §19).
    const { records: all, corrupt } = this.state.loadAll(opts.adopted);
    const records = opts.adopted?.size ? all.filter((r) => !opts.adopted!.has(r.id)) : all;
    const caps = config.tools.exec;
    const lost: Session[] = [];
    // The sessions whose processes outlived the last run, until they are gone.
    const ending = new Map<string, Promise<unknown>>();
    for (const r of records) {
      let s: Session;
      try {
        // A hand-over this image could not read: its sessions are lost, and their records say why.
        const why = typeof opts.lostWhy === 'function' ? opts.lostWhy(r.id) : opts.lostWhy;
        const record = why && !isEnded(r) && !isPendingApproval(r) ? { ...r, error: why } : r;
        s = restoreSession(record, this.registry.events, caps, Spool.restore(this.state.spoolPath(r.id), r.spool));
      } catch (err) {
        this.state.setAside(r.id, (err as Error).message);
        continue;
      }
      s.recordWith(() => this.state.save(toRecord(s)));
      this.registry.add(s);
      if (isPendingApproval(r)) pending(s);
      else if (!isEnded(r)) {
        // A persistent shell's command whose shell a crash kept (its pid is the shell's): what it left runs in the shell, which stays.
        if (r.pid !== undefined && opts.spare?.has(r.pid)) {
          this.state.save(toRecord(s));
          continue;
        }
        lost.push(s);
        if (r.pid !== undefined && r.pidStartTime !== undefined && readStat(r.pid)?.startTime === r.pidStartTime) {
          ending.set(r.id, terminate({ pgid: r.pid, pids: [] }, 'SIGTERM', caps.killGraceMs));
          // A leader still this PID's child (a planned restart whose hand-over this image could not read) is reaped here once it goes.
          reapChild(r.pid);
        }
        this.state.save(toRecord(s));
      }
    }
    const survivors = findSessionProcesses(new Set(lost.map((s) => s.id)));
    for (const [id, list] of survivors) {
      const gone = terminate({ pgid: undefined, pids: list.map((p) => p.pid) }, 'SIGTERM', caps.killGraceMs);
      ending.set(id, Promise.all([ending.get(id), gone]));
    }
    if (records.length || corrupt) {
      this.log.info({ restored: records.length - lost.length, lost: lost.length, corrupt }, 'state recovered');
    }
    return ending;
  }
}
