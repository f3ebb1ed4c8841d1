import { closeSync, constants, fchownSync, openSync, unlinkSync, writeSync } from 'node:fs';
import type { Session, StopRequest } from '../session/session.js';
import type { StopReason } from '../session/types.js';
import { cgroupOf, terminateCgroups } from './cgroup.js';
import { terminateAll } from './group.js';
import { findSessionProcesses, oldestLeader, signalPids } from './sweep.js';

export interface StopOptions {
  /** Who stops it. */
  reason: StopReason;
  signal: NodeJS.Signals;
  graceMs: number;
  note?: string;
}

/**
 * The one stop path (kill, kill all, timeout, cancel, replace, shutdown): write each stop file,
 * signal every process of the session (its cgroup's members; without a cgroup, its group and the
 * processes that left it, found by their environment marker), wait the grace, then cgroup.kill
 * or SIGKILL what is left. A paused session is continued first. Resolves once every session has
 * ended; stopping a session twice is harmless.
 */
export async function stopSessions(sessions: Session[], opts: StopOptions): Promise<void> {
  const starting: Session[] = [];
  const own: Promise<void>[] = [];
  for (const s of sessions) {
    if (!s.running) continue;
    if (!s.requestStop({ reason: opts.reason, signal: opts.signal, at: Date.now(), note: opts.note })) continue;
    writeStopFile(s, s.stop!);
    const stopper = stoppers.get(s);
    if (stopper) own.push(stopper(opts));
    else starting.push(s);
  }
  // Sessions with a cgroup: its members are exactly the session's, and cgroup.kill ends them.
  const contained = starting.filter((s) => cgroupOf(s) !== undefined);
  const grouped = starting.filter((s) => cgroupOf(s) === undefined);
  for (const s of contained) s.stopEscalated(false);
  await Promise.all([
    contained.length > 0 &&
      terminateCgroups(
        contained.map((s) => ({ cg: cgroupOf(s)!, pgid: s.pid, session: s })),
        opts.signal,
        opts.graceMs,
        (i) => contained[i].stopEscalated(true),
      ),
    grouped.length > 0 && stopGroups(grouped, opts),
    ...own,
  ]);
  await Promise.all(sessions.map((s) => s.finished));
}

/** Where there is no cgroup: each process group, and what left it found by the session's marker in /proc. */
async function stopGroups(starting: Session[], opts: StopOptions): Promise<void> {
  const ids = new Set(starting.map((s) => s.id));
  const outside = (found: ReturnType<typeof findSessionProcesses>, s: Session) =>
    (found.get(s.id) ?? []).filter((p) => p.pgrp !== s.pid).map((p) => p.pid);
  const from = oldestLeader(starting);
  const before = findSessionProcesses(ids, from);
  for (const s of starting) s.stopEscalated(false);
  await terminateAll(
    starting.map((s) => ({ pgid: s.pid, pids: outside(before, s) })),
    opts.signal,
    opts.graceMs,
    (i) => starting[i].stopEscalated(true),
  );
  // Anything forked out of a group during the grace gets no second warning.
  const after = findSessionProcesses(ids, from);
  for (const s of starting) {
    const late = outside(after, s);
    if (late.length > 0) s.stopEscalated(true);
    signalPids(late, 'SIGKILL');
  }
}

/** Sessions that are not a process group of their own (a command in a persistent shell, SPEC §20) stop their own way. */
const stoppers = new WeakMap<Session, (opts: StopOptions) => Promise<void>>();

export function stopsItself(session: Session, stop: (opts: StopOptions) => Promise<void>): void {
  stoppers.set(session, stop);
}

export function stopSession(session: Session, opts: StopOptions): Promise<void> {
  return stopSessions([session], opts);
}

/** Sessions that run as another user (sandbox.user): their stop file is theirs to read. */
const owners = new WeakMap<Session, { uid: number; gid: number }>();

export function stopFileOwner(session: Session, user: { uid: number; gid: number }): void {
  owners.set(session, user);
}

/**
 * Tell the job first, through PROCCTL_STOP_FILE, so it can stop cleanly within the grace:
 * `reason` is the text given to kill (else who stopped it), `by` who stopped it (SPEC §9).
 * The directory is the job's: whatever it left at that name (a symlink to a file of the
 * daemon's, a FIFO that would block the write) is replaced, never followed or opened.
 */
function writeStopFile(session: Session, stop: StopRequest): void {
  if (!session.stopFile) return;
  const body = { sessionId: session.id, timestamp: new Date(stop.at).toISOString(), reason: stop.note ?? stop.reason, by: stop.reason, signal: stop.signal };
  let fd: number | undefined;
  try {
    try {
      unlinkSync(session.stopFile);
    } catch {
      // none there yet
    }
    fd = openSync(session.stopFile, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
    const owner = owners.get(session);
    if (owner) fchownSync(fd, owner.uid, owner.gid);
    writeSync(fd, `${JSON.stringify(body)}\n`);
  } catch {
    // The scratch directory may be gone (removed by the job), or the job raced us to the name; the signal still goes out.
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
