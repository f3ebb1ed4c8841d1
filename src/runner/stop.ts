import { closeSync, constants, fchownSync, openSync, unlinkSync, writeSync } from 'node:fs';
import type { Session, StopRequest } from '../session/session.js';
import type { StopReason } from '../session/types.js';
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
 * signal each whole group and every process of the session that left it (found by its
 * environment marker), wait the grace, SIGKILL what is left. Resolves once every session has
 * ended; stopping a session twice is harmless.
 */
export async function stopSessions(sessions: Session[], opts: StopOptions): Promise<void> {
  const starting: Session[] = [];
  for (const s of sessions) {
    if (!s.running) continue;
    if (!s.requestStop({ reason: opts.reason, signal: opts.signal, at: Date.now(), note: opts.note })) continue;
    writeStopFile(s, s.stop!);
    starting.push(s);
  }
  if (starting.length > 0) {
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
  await Promise.all(sessions.map((s) => s.finished));
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
