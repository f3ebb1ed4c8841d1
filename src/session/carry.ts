import { z } from 'zod';
import { NotifySchema, WaitForSchema, describeWaitFor } from '../schema/exec.js';
import type { DiskHealth } from './disk.js';
import type { EventBus } from './events.js';
import { sessionFromRecord, toRecord } from './persist.js';
import { SessionRecordSchema } from './record.js';
import type { Session } from './session.js';
import { Spool } from './spool.js';

/**
 * A running session as a restart hands it to the next image (SPEC §19): its record (with the
 * output so far), and what the record does not keep because a running session's record never
 * needed it. Every part of a session that outlives an image is named here once; what the runner
 * holds (descriptors, timers, cgroup) is runner/handover.ts's part of the hand-over.
 */
export const CarriedSessionSchema = z.object({
  record: SessionRecordSchema,
  /** The bytes of a character each stream's decoder held half read (base64). */
  held: z.object({ stdout: z.string().optional(), stderr: z.string().optional() }),
  scratch: z.object({ dir: z.string(), stopFile: z.string() }).optional(),
  checkpointKey: z.string().optional(),
  /** What the exec asked to be told of: its readiness wait and its notify (re-armed by tools/). */
  waitFor: WaitForSchema.optional(),
  notify: NotifySchema.optional(),
  readyAt: z.number().optional(),
  inputAt: z.number().optional(),
  paused: z.object({ since: z.number().optional(), before: z.number() }),
  /** The spool's file and cap; its counts are the record's. */
  spool: z.object({ file: z.string(), maxBytes: z.number() }).optional(),
});
export type CarriedSession = z.infer<typeof CarriedSessionSchema>;

/** What the exec that started a session asked for besides its command, kept for its next image. */
export interface ExecFollow {
  waitFor?: z.infer<typeof WaitForSchema>;
  notify?: z.infer<typeof NotifySchema>;
}

const follows = new WeakMap<Session, ExecFollow>();

/** The exec's waitFor and notify, told when it starts the session (a restart carries them). */
export function noteFollow(s: Session, follow: ExecFollow): void {
  if (follow.waitFor !== undefined || follow.notify !== undefined) follows.set(s, follow);
}

export function followOf(s: Session): ExecFollow {
  return follows.get(s) ?? {};
}

/** The session as it is now, to be handed on (its output stopped: a restart's quiet moment). */
export function carrySession(s: Session, pidStartTime: number | undefined): CarriedSession {
  const record = toRecord(s, pidStartTime);
  record.output = { retained: s.output.text(), dropped: s.output.droppedChars, total: s.output.totalChars, pending: s.output.peekPending() };
  const held = s.output.heldBytes();
  const follow = followOf(s);
  const paused = s.pausedState();
  return {
    record,
    held: { ...(held.stdout ? { stdout: held.stdout.toString('base64') } : {}), ...(held.stderr ? { stderr: held.stderr.toString('base64') } : {}) },
    ...(s.tmpdir && s.stopFile ? { scratch: { dir: s.tmpdir, stopFile: s.stopFile } } : {}),
    ...(s.checkpointKey ? { checkpointKey: s.checkpointKey } : {}),
    ...follow,
    ...(s.readiness?.readyAt !== undefined ? { readyAt: s.readiness.readyAt } : {}),
    ...(s.lastInputAt !== undefined ? { inputAt: s.lastInputAt } : {}),
    paused,
    ...(s.spool && s.spool.maxBytes > 0 ? { spool: { file: s.spool.file, maxBytes: s.spool.maxBytes } } : {}),
  };
}

/**
 * The session back in the next image, running as it was, before its process is wired to it
 * again (runner/handover.ts adoptJob); its interrupt, if it waited for input, is raised again then.
 */
export function resumeSession(c: CarriedSession, events: EventBus, caps: { maxOutputChars: number; pendingMaxOutputChars: number }, disk: DiskHealth | undefined, shell?: string): Session {
  const r = c.record;
  const spool = c.spool ? Spool.resume(c.spool.file, c.spool.maxBytes, disk, r.spool ?? { totalBytes: 0, droppedBytes: 0 }) : undefined;
  const s = sessionFromRecord(r, events, caps, spool, { status: 'running', pid: r.pid }, {
    scratch: c.scratch,
    checkpointKey: c.checkpointKey,
    waitFor: c.waitFor && describeWaitFor(c.waitFor),
    notify: c.notify,
    // A persistent shell's command, carried with its shell (shells/shells.ts): its rows still name the shell.
    ...(shell !== undefined ? { shell } : {}),
    restored: { carried: { readyAt: c.readyAt, inputAt: c.inputAt, paused: c.paused } },
  });
  for (const stream of ['stdout', 'stderr'] as const) {
    const held = c.held[stream];
    if (held) s.output.restoreHeld(stream, Buffer.from(held, 'base64'));
  }
  noteFollow(s, { waitFor: c.waitFor, notify: c.notify });
  return s;
}
