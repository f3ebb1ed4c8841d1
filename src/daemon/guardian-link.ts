import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, fstatSync, ftruncateSync, mkdirSync, openSync, readSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Logger } from 'pino';
import { loadAddon } from '../base/addon.js';
import { bridgeSignals } from '../base/signal-bridge.js';
import { readStat } from '../runner/procfs.js';
import type { Session } from '../session/session.js';
import { keptChanges, keptMessage, type KeptExtra } from './handover/crash.js';
import { readSlots, SLOT_BYTES, slotLine } from './guardian-slots.js';

/** What a crash does to running sessions (config `durability`, SPEC §19), told to the guardian at its start. */
export interface CrashPolicy {
  onCrash: 'keep' | 'kill';
  crashGraceMs: number;
  /** Where the guardian waits for the next daemon (handover/crash.ts guardianSocket). */
  socket: string;
}

/** What the guardian removes once it has killed every session after a crash: the subtrees the daemon made (src/cgroup/host.ts), unless another daemon holds its state directory's lock by then. */
export interface GuardianTidy {
  made: readonly string[];
  lock?: string;
}

/** The guardian's own settings, in its environment. */
export const GUARDIAN_ENV = 'PROCCTL_GUARDIAN';

interface KeepAddon {
  keepPair(): [number, number];
  keepSend(socket: number, text: string, fds: number[]): boolean;
}

/**
 * The daemon's side of the guardian: start it, keep its table of running sessions, say goodbye
 * on a clean exit. The table is a file only the two share (opened, then unlinked, and handed to
 * the guardian as its fd 3): one fixed-size slot per running session, written in place. Telling
 * the guardian of a session wakes nobody; it reads the table only once the daemon is gone.
 */
export class GuardianLink {
  /** Our end of the socket the guardian keeps sessions' descriptors in (crash "keep"), if any. */
  private keepFd: number | undefined;
  private keepAddon: KeepAddon | undefined;
  /** Sessions whose descriptors the guardian's queue had no room for yet: sent again shortly. */
  private readonly unsent = new Map<string, Session>();
  /** What a session's message says besides its job (a persistent shell, a shell's command), for each sending of it. */
  private readonly extras = new Map<string, KeptExtra>();
  /** The leaders' start times (`started`): a pidfd opened for the guardian is checked against it. */
  private readonly startTimes = new Map<string, number>();
  private retry: NodeJS.Timeout | undefined;

  private child: ChildProcess | undefined;
  private table: number | undefined;
  private readonly slotOf = new Map<string, number>();
  private readonly free: number[] = [];
  private slots = 0;
  private failed = false;
  /** A guardian the last image started (a planned restart): its pid and our end of its pipe. */
  private adopted: { pid: number; pipe: number } | undefined;
  /** The slots of the sessions a planned restart handed over, until each is adopted (`add`) or `settled()`. */
  private readonly carried = new Map<string, { slot: number; pgid: number }>();

  constructor(private readonly log: Logger) {}

  /**
   * Start the guardian; its table lives (unlinked) in `dir`, the daemon's private runtime
   * directory. `cgroupRoots`: the directories sessions' cgroups are made in (src/cgroup/): the
   * guardian empties every session cgroup there when the daemon dies, and removes them and `tidy.made` after.
   */
  start(dir: string, cgroupRoots: readonly string[] = [], crash: CrashPolicy = { onCrash: 'kill', crashGraceMs: 0, socket: '' }, tidy: GuardianTidy = { made: [] }): void {
    const script = fileURLToPath(new URL('./guardian.js', import.meta.url));
    let table: number;
    try {
      mkdirSync(dir, { recursive: true, mode: 0o700 });
      const file = join(dir, `guardian-${process.pid}`);
      table = openSync(file, 'w+', 0o600);
      unlinkSync(file);
    } catch (err) {
      this.log.error({ err }, 'cannot make the guardian its table: sessions are not protected against a daemon crash');
      return;
    }
    // With "keep", a socket pair of datagrams: each session's descriptors wait in the guardian's queue (fd 4).
    let pair: [number, number] | undefined;
    if (crash.onCrash === 'keep') {
      const addon = loadAddon<KeepAddon>(['keepPair', 'keepSend']);
      if (addon instanceof Error) this.log.warn({ err: addon.message }, 'durability.onCrash is "keep" but the addon is not loaded: a crash kills the sessions');
      else {
        this.keepAddon = addon;
        pair = addon.keepPair();
      }
    }
    // The daemon it watches, named here: a guardian that loads after the daemon died (a crash just
    // after the start) has another parent by then, and must not take that one for the daemon.
    const daemon = { pid: process.pid, startTime: readStat(process.pid)?.startTime };
    const env = { ...process.env, [GUARDIAN_ENV]: JSON.stringify({ ...crash, onCrash: pair ? crash.onCrash : 'kill', ...tidy, daemon }) };
    const child = spawn(process.execPath, [script, ...cgroupRoots], { stdio: ['pipe', 'ignore', 'inherit', table, ...(pair ? [pair[1]] : [])], detached: true, env });
    if (pair) {
      closeSync(pair[1]);
      this.keepFd = pair[0];
    }
    child.stdin!.on('error', () => undefined);
    child.on('exit', (code, signal) => {
      if (this.child === child) {
        this.child = undefined;
        this.log.error({ code, signal }, 'the guardian exited; sessions are no longer protected against a daemon crash');
      }
    });
    child.on('error', (err) => this.log.error({ err }, 'cannot start the guardian'));
    bridgeSignals(child);
    this.child = child;
    this.table = table;
  }

  /**
   * The guardian a planned restart kept (SPEC §19): its table and our end of its pipe came through
   * the exec. The table still lists every session handed over, each in its slot: a session adopted
   * keeps its slot as it is (nothing is written, so the guardian, which may read the table at any
   * moment, never sees a carried session missing and never lets go of the descriptors it holds for
   * it), and `settled()` frees the slots of those not taken back.
   */
  adopt(g: { pid: number; pipe: number; table: number; keep?: number }): void {
    this.table = g.table;
    this.carried.clear();
    try {
      const size = fstatSync(g.table).size;
      const text = Buffer.alloc(size);
      readSync(g.table, text, 0, size, 0);
      const slots = Math.floor(size / SLOT_BYTES);
      for (let slot = 0; slot < slots; slot++) {
        const [s] = readSlots(text.toString('latin1', slot * SLOT_BYTES, (slot + 1) * SLOT_BYTES));
        if (s) this.carried.set(s.id, { slot, pgid: s.pgid });
        else this.free.push(slot);
      }
      this.slots = slots;
      // The lowest free slot is taken first (free is a stack).
      this.free.reverse();
    } catch (err) {
      // Unreadable: every session is written again from slot 0, as a new table.
      this.log.warn({ err }, 'cannot read the guardian its table carried over; it is written again');
      this.carried.clear();
      this.free.length = 0;
      this.slots = 0;
    }
    if (g.keep !== undefined) {
      const addon = loadAddon<KeepAddon>(['keepPair', 'keepSend']);
      if (!(addon instanceof Error)) {
        this.keepAddon = addon;
        this.keepFd = g.keep;
      }
    }
    this.adopted = { pid: g.pid, pipe: g.pipe };
  }

  /** Every session handed over is adopted or lost: the slots of those not taken back are freed, the table's free tail cut. */
  settled(): void {
    if (this.table === undefined) return;
    for (const { slot } of this.carried.values()) {
      this.write(slot, slotLine(undefined));
      this.free.push(slot);
    }
    this.carried.clear();
    const used = new Set(this.slotOf.values());
    while (this.slots > 0 && !used.has(this.slots - 1)) this.slots--;
    for (let i = this.free.length - 1; i >= 0; i--) if (this.free[i] >= this.slots) this.free.splice(i, 1);
    this.free.sort((a, b) => b - a);
    try {
      ftruncateSync(this.table, this.slots * SLOT_BYTES);
    } catch (err) {
      this.log.error({ err }, 'cannot trim the guardian its table');
    }
  }

  /** The guardian's pid and what a restart keeps of it: our end of its pipe and its table. */
  handOver(): { pid: number; pipe: number; table: number; keep?: number } | undefined {
    if (this.table === undefined) return undefined;
    const keep = this.keepFd === undefined ? {} : { keep: this.keepFd };
    if (this.adopted) return { ...this.adopted, table: this.table, ...keep };
    const pipe = (this.child?.stdin as { _handle?: { fd?: number } } | undefined)?._handle?.fd;
    if (!this.child?.pid || typeof pipe !== 'number' || pipe < 0) return undefined;
    return { pid: this.child.pid, pipe, table: this.table, ...keep };
  }

  private write(slot: number, line: string): void {
    if (this.table === undefined) return;
    try {
      writeSync(this.table, line, slot * SLOT_BYTES, 'latin1');
    } catch (err) {
      if (!this.failed) this.log.error({ err }, 'cannot write the guardian its table: sessions started now are not protected against a daemon crash');
      this.failed = true;
    }
  }

  /** A session runs: its process group, led by `pgid`, started about now (or carried over in its slot). */
  add(sessionId: string, pgid: number): void {
    const carried = this.carried.get(sessionId);
    this.carried.delete(sessionId);
    if (carried && carried.pgid === pgid) {
      this.slotOf.set(sessionId, carried.slot);
      return;
    }
    if (carried) this.free.push(carried.slot);
    const slot = this.free.pop() ?? this.slots++;
    this.slotOf.set(sessionId, slot);
    this.write(slot, slotLine({ id: sessionId, pgid, spawnedAt: Date.now() }));
  }

  /** The leader's start time, once read (for a session that runs on): the guardian then checks it exactly. */
  started(sessionId: string, pgid: number, startTime: number): void {
    const slot = this.slotOf.get(sessionId);
    if (slot !== undefined) this.write(slot, slotLine({ id: sessionId, pgid, startTime }));
    this.startTimes.set(sessionId, startTime);
  }

  /**
   * A session that runs on (its first record): the guardian gets a copy of its descriptors, to
   * keep it through a crash (durability.onCrash "keep"). They wait unread in the guardian's queue,
   * which it drains once a second (dropping those of ended sessions): sending wakes nobody.
   */
  keep(s: Session, extra?: KeptExtra): void {
    if (this.keepFd === undefined || !this.keepAddon) return;
    if (extra) this.extras.set(s.id, extra);
    const msg = keptMessage(s, this.extras.get(s.id), this.startTimes.get(s.id));
    if (!msg) return;
    // A proxy's listening sockets still to come: sent again once they are in (the guardian keeps the newest).
    void keptChanges(s)?.then(() => {
      if (s.running && this.slotOf.has(s.id)) this.keep(s);
    });
    let sent = false;
    try {
      sent = this.keepAddon.keepSend(this.keepFd, msg.text, msg.fds);
    } catch (err) {
      this.log.error({ err, sessionId: s.id }, 'cannot give the guardian a session\'s descriptors: a crash kills it');
      return;
    } finally {
      // The pidfd opened for this message: the guardian's copy is its own.
      if (msg.opened !== undefined) closeSync(msg.opened);
    }
    if (sent) {
      this.unsent.delete(s.id);
      return;
    }
    this.unsent.set(s.id, s);
    // The queue is full (~160 sessions since the guardian last drained it): ask it to drain now,
    // once per full queue, over the pipe it listens on anyway.
    if (!this.retry) {
      this.log.debug({ waiting: this.unsent.size }, 'the guardian\'s queue is full: it is asked to drain, and the sessions that wait are sent again in 50 ms');
      this.poke();
    }
    this.retry ??= setTimeout(() => {
      this.retry = undefined;
      const waited = this.unsent.size;
      for (const u of [...this.unsent.values()]) {
        this.unsent.delete(u.id);
        if (u.running && this.slotOf.has(u.id)) this.keep(u);
      }
      if (this.unsent.size === 0) this.log.debug({ sessions: waited }, 'the guardian took every session that waited for room in its queue');
    }, 50);
    this.retry.unref();
  }

  private poke(): void {
    try {
      if (this.child) this.child.stdin?.write('drain\n');
      else if (this.adopted) writeSync(this.adopted.pipe, 'drain\n');
    } catch {
      // the guardian is gone: said when it exited
    }
  }

  remove(sessionId: string): void {
    this.unsent.delete(sessionId);
    this.extras.delete(sessionId);
    this.startTimes.delete(sessionId);
    const slot = this.slotOf.get(sessionId);
    if (slot === undefined) return;
    this.slotOf.delete(sessionId);
    this.write(slot, slotLine(undefined));
    this.free.push(slot);
  }

  /** A clean shutdown: every session is already stopped, so the guardian just leaves. */
  stop(): void {
    const child = this.child;
    this.child = undefined;
    if (child) {
      child.stdin?.write('bye\n');
      child.stdin?.end();
    }
    if (this.adopted) {
      try {
        writeSync(this.adopted.pipe, 'bye\n');
        closeSync(this.adopted.pipe);
      } catch {
        // the guardian is gone
      }
      this.adopted = undefined;
    }
    if (this.table !== undefined) closeSync(this.table);
    this.table = undefined;
    clearTimeout(this.retry);
    if (this.keepFd !== undefined) closeSync(this.keepFd);
    this.keepFd = undefined;
  }
}
