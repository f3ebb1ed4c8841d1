import { closeSync, constants, fstatSync, openSync, readSync } from 'node:fs';
import type { SessionCgroup } from '../cgroup/session.js';
import { limitReason } from '../sandbox/limits.js';
import type { LaunchPlan } from '../sandbox/plan.js';
import { noteExitUnknown } from '../session/persist.js';
import type { Session } from '../session/session.js';
import { liveGroupMembers, terminate, waitGroupGone } from './group.js';
import { adoptPipes, launchPipes, type PipeEnds, type StartedOnPipes } from './launch/pipes.js';
import { adoptPty, launchPty } from './launch/pty.js';
import type { LaunchHooks, Launched, TerminalEnds } from './launch/types.js';
import { giveCgroup, removeCgroupWhenEmpty, terminateCgroups, waitCgroupsEmpty } from './cgroup.js';
import { SandboxInit } from './namespace.js';
import { nativeSpawner, signalName } from './native.js';
import { stopSession } from './stop.js';
import { findSessionProcesses, sweepAfterExit } from './sweep.js';
import type { JobEnv } from './env.js';

export interface SpawnOptions {
  /** What to run and how it is confined (runner/start.ts asked sandbox/plan.ts). */
  plan: LaunchPlan;
  env: JobEnv;
  /** Seconds; 0 = none. */
  timeoutSec: number;
  killGraceMs: number;
  pty: boolean;
  /** The session's cgroup, made before the spawn (SPEC §15); the plan already joins it. */
  cgroup?: SessionCgroup;
  /** Told when a session's cgroup could not be removed after its end. */
  onCgroupStuck?: (dirs: string[]) => void;
  /** A job the last image started (a planned restart, SPEC §19): wired again from its descriptors, not launched. */
  adopt?: PipeEnds | TerminalEnds;
  /**
   * A sandboxed job's exit status as bwrap wrote it (`--json-status-fd`, EXIT_STATUS_FILE in its
   * scratch directory): read when the leader's exit said nothing (a crash left it no parent to wait for it).
   */
  exitFile?: string;
  /** A job on pipes already started for this session (runner/start.ts, before the session was made): wired, not launched. */
  started?: StartedOnPipes;
}

/** Where bwrap writes a sandboxed job's exit status, in its scratch directory (JSON lines; `exit-code` last). */
export const EXIT_STATUS_FILE = '.procctl-exit-status.json';

/** What of bwrap's status file is read, at most: its few JSON lines are far smaller. */
const STATUS_MAX_BYTES = 64 * 1024;

/** The exit code bwrap wrote into `file`, or undefined when it wrote none (yet) or the file is gone. */
export function bwrapExitCode(file: string): number | undefined {
  // The file is in the job's scratch directory, which the job can write: it may have put a FIFO
  // (whose read would hold the daemon's thread), a symlink or a huge file there. Only a regular
  // file, not followed through a link, opened without blocking, and its first 64 KiB are read.
  let text: string;
  let fd: number | undefined;
  try {
    fd = openSync(file, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    if (!fstatSync(fd).isFile()) return undefined;
    const buf = Buffer.alloc(STATUS_MAX_BYTES);
    text = buf.subarray(0, readSync(fd, buf, 0, buf.length, 0)).toString('utf8');
  } catch {
    return undefined;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
  for (const line of text.split('\n').reverse()) {
    try {
      const code = (JSON.parse(line) as { 'exit-code'?: unknown })['exit-code'];
      if (typeof code === 'number' && Number.isInteger(code) && code >= 0) return code;
    } catch {
      // not a whole line
    }
  }
  return undefined;
}

/** What a running session's wiring holds that a restart hands to the next image (daemon/handover/). */
export interface Wiring {
  launched: Launched | undefined;
  timeoutSec: number;
  killGraceMs: number;
  cgroup: SessionCgroup | undefined;
  sandboxed: boolean;
  limits: LaunchPlan['limits'];
  /** The leader has exited and the session is being finished (its status is this image's alone). */
  exited: boolean;
  /** The job holds descriptors of the daemon's besides its stdio (a confined job's channel): not carried by a restart. */
  channel: boolean;
  /** Its output is held unread (a restart's quiet moment): its end waits for reading to resume. */
  held: boolean;
}

const wirings = new WeakMap<Session, Wiring>();

/** A restart holds (or lets go of) a session's output: its end waits while it is held. */
export function holdWiring(session: Session, held: boolean): void {
  const w = wirings.get(session);
  if (w) w.held = held;
}

/** A running session's wiring, for a restart to hand over (undefined: not started here, or over). */
export function wiringOf(session: Session): Readonly<Wiring> | undefined {
  return wirings.get(session);
}

/** How long to wait for the output to close once every process of the group is gone. */
const PIPE_DRAIN_MS = 250;

/**
 * Start the session's command in a process group of its own (on pipes or a terminal) and wire
 * it to the session. The session ends when its leader exits and nothing of its group is left:
 * leftovers get the stop signal, the grace, then SIGKILL, so `cmd &` can neither orphan a
 * process nor keep the session running. Returns a warning when a terminal was asked for and
 * could not be had.
 */
export function spawnSession(session: Session, opts: SpawnOptions): string | undefined {
  let exited: { code: number | null; signal: string | null } | undefined;
  let exitPeakBytes: number | undefined;
  let groupGone = false;
  let outputClosed = false;
  let drainTimer: NodeJS.Timeout | undefined;
  let drainTurn: NodeJS.Immediate | undefined;
  let timeoutTimer: NodeJS.Timeout | undefined;
  let launched: Launched | undefined;

  const plan = opts.plan;
  const cg = opts.cgroup;
  if (cg) giveCgroup(session, cg);
  let init: SandboxInit | undefined;
  let finished = false;
  const finish = (error?: string) => {
    if (finished) return;
    finished = true;
    clearTimeout(drainTimer);
    clearImmediate(drainTurn);
    clearTimeout(timeoutTimer);
    wirings.delete(session);
    init?.release();
    // Let go of the review session's mount namespace off the main thread: its overlay's unmount happens there.
    const end = { exitCode: exited?.code ?? null, signal: exited?.signal ?? null };
    // A limit of the cgroup ended it when the kernel counted a kill or a refused fork and it did not succeed.
    const hit = cg && end.exitCode !== 0 ? cg.limitHit() : undefined;
    const peak = exitPeakBytes;
    session.finish({ ...end, error, reason: hit ?? limitReason(end, plan.limits), resources: cg ? () => cg.resources(true, peak) : undefined });
    // What is not part of the answer waits for the turn after it: the exec that waits for this end
    // answers first (docs/benchmarks.md, the exec round trip). Its figures are read then, or when
    // asked for before, and before its cgroup goes (whose removal waits for that turn too).
    setImmediate(() => {
      void session.resources;
      launched?.release();
      cg?.releaseEvents();
    });
    if (cg) removeCgroupWhenEmpty(cg, opts.onCgroupStuck);
    // With a cgroup nothing can have left the session: it was empty before this end.
    else if (!session.stop && session.pid !== undefined) sweepAfterExit(session.id, session.pid, session.startedAt, opts.killGraceMs);
  };
  const maybeFinish = () => {
    if (exited && groupGone && outputClosed) finish();
  };
  // Chunks read so far: the drain below waits while they keep coming.
  let chunks = 0;
  /**
   * Once every process of the group is gone, the output may still be held open by a process that
   * escaped it: stop waiting for its end after PIPE_DRAIN_MS without a byte. Timers run before
   * the loop reads its descriptors, so after a stall of the daemon (a busy loop, a loaded host)
   * an expired timer would come before output already written and unread: the end is decided
   * only after one more turn of the loop has read what was there, and waited again while it came.
   */
  const drainOrDetach = () => {
    const seen = chunks;
    drainTimer = setTimeout(() => {
      drainTurn = setImmediate(() => {
        if (outputClosed || finished) return;
        // Held by a restart: what is still in the pipe is read once reading resumes, never dropped.
        if (chunks !== seen || wirings.get(session)?.held) return drainOrDetach();
        launched?.detachOutput();
        outputClosed = true;
        maybeFinish();
      });
    }, PIPE_DRAIN_MS);
  };
  const hooks: LaunchHooks = {
    sessionId: session.id,
    output: (stream, chunk, spooled) => {
      chunks++;
      session.onOutput(stream, chunk, spooled);
    },
    spool: session.spliceSpool,
    unfinished: (stream) => session.output.unfinished(stream),
    failed: (message) => finish(message),
    inputClosed: () => session.inputClosed(),
    closed: () => {
      outputClosed = true;
      maybeFinish();
    },
    exit: (code, signal, maxRssBytes, unknown) => {
      // A job a crashed daemon started: its status, when neither its zombie nor its pidfd told it, is what bwrap wrote.
      if (code === null && signal === null && opts.exitFile) code = bwrapExitCode(opts.exitFile) ?? null;
      if (code === null && signal === null && unknown) noteExitUnknown(session, unknown);
      exited = plan.sandboxed ? jobStatus(code, signal) : { code, signal };
      const wiring = wirings.get(session);
      if (wiring) wiring.exited = true;
      exitPeakBytes = maxRssBytes;
      const reap = () => (cg ? reapCgroup(session, cg, opts.killGraceMs) : reapLeftovers(session, launched?.pid, opts.killGraceMs, plan.sandboxed));
      // In a sandbox, its init says at once whether anything of the job is left.
      void (init?.gone() ? Promise.resolve() : reap()).then(() => {
        groupGone = true;
        if (outputClosed) return maybeFinish();
        // Only a process that escaped the group can still hold the output open: stop waiting once it is quiet.
        drainOrDetach();
      });
    },
  };

  const spec = { plan, cwd: session.cwd, env: opts.env, stdin: session.stdinMode };
  let warning: string | undefined;
  let pty = false;
  if (opts.adopt) {
    const addon = nativeSpawner();
    // A restart hands over only where the addon runs (it is what replaced the image).
    if (addon instanceof Error) throw addon;
    if ('terminal' in opts.adopt) {
      launched = adoptPty(addon, opts.adopt, hooks);
      pty = true;
    } else launched = adoptPipes(addon, opts.adopt, hooks);
  } else if (opts.pty && !opts.started) {
    try {
      launched = launchPty(spec, hooks);
      pty = true;
    } catch (err) {
      warning = `a pseudo-terminal could not be created (${(err as Error).message}); the command runs on pipes`;
    }
  }
  launched ??= launchPipes(spec, hooks, opts.started);
  // The job has started: what its end reads is made ready while it runs.
  if (!finished) cg?.holdEvents();
  if (plan.sandboxed && launched.pid !== undefined) init = new SandboxInit(launched.pid);
  session.attach({ pid: launched.pid, input: launched.input, stdinId: launched.stdinId, pty, resize: launched.resize, carried: opts.adopt !== undefined });
  if (!finished) wirings.set(session, { launched, timeoutSec: opts.timeoutSec, killGraceMs: opts.killGraceMs, cgroup: cg, sandboxed: plan.sandboxed, limits: plan.limits, exited: exited !== undefined, channel: plan.inherit.length > 0, held: false });

  if (launched.pid !== undefined && opts.timeoutSec > 0) {
    // Time spent paused does not count (SPEC §15): at the deadline, a paused session waits on.
    // Counted from the session's start, so a session adopted after a restart stops when it would have.
    const due = () => session.startedAt + opts.timeoutSec * 1000 + session.pausedMs();
    const check = () => {
      const left = due() - Date.now();
      if (session.paused || left > 0) timeoutTimer = setTimeout(check, Math.max(left, PAUSED_RECHECK_MS));
      else void stopSession(session, { reason: 'timeout', signal: 'SIGTERM', graceMs: opts.killGraceMs });
    };
    timeoutTimer = setTimeout(check, Math.max(0, due() - Date.now()));
  }
  return warning;
}

/** How often a paused session past its timeout looks again whether it was continued. */
const PAUSED_RECHECK_MS = 250;

/**
 * After the leader exits, terminate what is left in the session's cgroup, wherever it went
 * (setsid, a double fork), unless a stop already is: the stop signal, the grace, cgroup.kill.
 */
async function reapCgroup(session: Session, cg: SessionCgroup, graceMs: number): Promise<void> {
  if (!cg.populated()) return;
  if (!session.beginCleanup()) {
    await waitCgroupsEmpty([cg], graceMs + 6000);
    return;
  }
  await terminateCgroups([{ cg, pgid: session.pid, session }], 'SIGTERM', graceMs);
}

/**
 * bwrap reports a job killed by signal N as exit status 128+N, as a shell does, and nothing else
 * tells the two apart: read it back as the signal, so a sandboxed job ends as an unsandboxed
 * one would (docs/sandbox.md). A job that itself exits 129..192 reads as killed by that signal.
 */
function jobStatus(code: number | null, signal: string | null): { code: number | null; signal: string | null } {
  if (code === null || code <= 128 || code > 128 + 64) return { code, signal };
  const name = signalName(code - 128);
  return name.startsWith('SIG') ? { code: null, signal: name } : { code, signal };
}

/**
 * After the leader exits, terminate what is left of its group (unless a stop already is). In a
 * sandbox the rest of the namespace dies with its init, which stays in the group while anything
 * of the job lives: processes that left the group get the stop signal and the grace with it.
 */
async function reapLeftovers(session: Session, pgid: number | undefined, graceMs: number, sandboxed: boolean): Promise<void> {
  if (pgid === undefined || liveGroupMembers(pgid).length === 0) return;
  if (!session.beginCleanup()) {
    // The stop in progress escalates on its own schedule; no process gets its signal twice.
    await waitGroupGone(pgid, graceMs + 6000);
    return;
  }
  const outside = sandboxed ? (findSessionProcesses(new Set([session.id]), pgid).get(session.id) ?? []).filter((p) => p.pgrp !== pgid).map((p) => p.pid) : [];
  await terminate({ pgid, pids: outside }, 'SIGTERM', graceMs);
}
