import type { JobInput } from '../../session/input.js';
import type { Stream } from '../../session/output.js';
import type { Spool } from '../../session/spool.js';
import type { LaunchPlan } from '../../sandbox/plan.js';
import { closeQuietly } from '../../base/close-quietly.js';
import type { JobEnv } from '../env.js';

/** What a session writes its input to: a pipe or a terminal. */

export interface LaunchHooks {
  /** The session the job is launched for: named in the daemon's log when its output cannot be read the usual way. */
  sessionId: string;
  /**
   * `spooled`: the reader put the chunk's whole characters in `spool` already (spliced,
   * runner/launch/splice.ts); a character it ends inside is left for the capture to write.
   */
  output(stream: Stream, chunk: Buffer | string, spooled?: boolean): void;
  /** Where a job on pipes may have its output spliced (its session's spool; none: read it as before). */
  spool?: Spool;
  /** The stream's capture holds the first bytes of a character (SessionOutput.unfinished): a splicing reader reads meanwhile. */
  unfinished(stream: Stream): boolean;
  /**
   * The leader exited (its status is known; output may still be in flight). `maxRssBytes`: the
   * largest resident size of the leader or of a descendant it waited for, where the spawner can tell.
   */
  exit(code: number | null, signal: string | null, maxRssBytes?: number, unknown?: string): void;
  /** All output has been delivered (every writer of the output closed it). */
  closed(): void;
  /** The command could not be started at all. */
  failed(message: string): void;
  /** The job closed its stdin (or writing to it failed). */
  inputClosed(): void;
}

export interface Launched {
  pid: number | undefined;
  /** What the job's fd 0 is (`socket:[…]`, `/dev/pts/N`), read before the job can redirect it. */
  stdinId: string | undefined;
  input: JobInput | undefined;
  /** Stop waiting for the output: close our ends. */
  detachOutput(): void;
  /**
   * The session is over: close every end the daemon still holds (stdin above all, which no
   * one closes when the job never reads to its end) and let go of the session's hooks.
   */
  release(): void;
  /** Stop reading the job's output (it waits in the kernel's pipe) until the returned resume: a restart's quiet moment. */
  holdOutput?(): () => void;
  /**
   * The descriptors a restart hands to the next image (SPEC §19), and the input still queued in
   * this image (which would not reach the job): undefined for a launch that cannot be handed over
   * (a job started by fork).
   */
  ends?(): ({ pid: number; stdout: number; stderr: number; stdin: number; stdinId?: string; pidfd?: number } | TerminalEnds) & { stdinQueued: number } | undefined;
  /** Its leader is reaped by a thread of node-pty's (a terminal launched by this image): a restart parks that thread (runner/handover.ts parkTerminals). */
  reapedByThread?: boolean;
  /** For a terminal: its size changed. */
  resize?(cols: number, rows: number): void;
}

/** The descriptors of a job on a terminal that a restart hands to the next image: the master, and the terminal's name. */
export interface TerminalEnds {
  pid: number;
  /** The pseudo-terminal's master: the job's output is read from it, its input written to it. */
  terminal: number;
  /** The job's side (`/dev/pts/N`): its fd 0, and what the new image holds open until the output is read. */
  pts: string;
  /** A pidfd to the leader, for a job adopted after a crash: how it ended, once its new parent reaped it (runner/native.ts). */
  pidfd?: number;
  /** The pipe its output goes through on its way to the spool (runner/launch/tap.ts); absent where the terminal is read directly. */
  tap?: TapEnds;
}

/**
 * A terminal's tap pipe as a restart hands it on (runner/launch/tap.ts): its read end, which the
 * guardian keeps too, and its write end, which only the daemon holds (so the pipe ends when the
 * tap does). After a crash the write end is gone with the daemon that held it: the next one opens
 * the pipe again for writing, so what the dead one had moved into it is read first.
 */
export interface TapEnds {
  read: number;
  write?: number;
}

export interface LaunchSpec {
  /** What to run and how it is confined (src/sandbox/plan.ts): the shell, or bwrap around it. */
  plan: Pick<LaunchPlan, 'file' | 'args' | 'steps' | 'wrapped' | 'inherit'>;
  cwd: string;
  env: JobEnv;
  stdin: 'pipe' | 'null';
}

/** A hook that does nothing (a launch that has nothing to release). */
export const nothing = () => undefined;

/**
 * An adopted job's launch that also holds a pidfd to its leader (kept by the guardian through a
 * crash): handed on with its ends (to the guardian, or the next image) while the job runs, and
 * closed once its exit has been told (`told`) or the session is over.
 */
export function withPidfd(launched: Launched, pidfd: number | undefined): Launched & { told(): void } {
  let fd = pidfd;
  const close = () => {
    if (fd === undefined) return;
    closeQuietly(fd);
    fd = undefined;
  };
  const ends = launched.ends;
  return {
    ...launched,
    ...(ends
      ? {
          ends: () => {
            const e = ends();
            return e && fd !== undefined ? { ...e, pidfd: fd } : e;
          },
        }
      : {}),
    release: () => {
      close();
      launched.release();
    },
    told: close,
  };
}
