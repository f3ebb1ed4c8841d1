import { basename, join } from 'node:path';
import type { Config } from '../config/schema.js';
import { limitReason } from '../sandbox/limits.js';
import { planLaunch, sessionUser, type LaunchPlan } from '../sandbox/plan.js';
import { accessProblem, type RunAs } from '../sandbox/user.js';
import type { Session } from '../session/session.js';
import { liveGroupMembers, terminate, waitGroupGone } from './group.js';
import { launchPipes, launchPty, type LaunchHooks, type Launched } from './launch.js';
import { SandboxInit } from './namespace.js';
import { signalName } from './native.js';
import { shellArgs } from './shell.js';
import { scratchFor } from './scratch.js';
import { stopFileOwner, stopSession } from './stop.js';
import { findSessionProcesses, sweepAfterExit } from './sweep.js';

export interface SpawnOptions {
  shell: string;
  env: NodeJS.ProcessEnv;
  /** Seconds; 0 = none. */
  timeoutSec: number;
  killGraceMs: number;
  pty: boolean;
  /** `elevated: true` runs without sandbox and limits (SPEC §12). */
  elevated?: boolean;
  /** The sandbox and limits in force; none when absent. */
  config?: Pick<Config, 'sandbox' | 'limits'>;
}

const UNCONFINED: Pick<Config, 'sandbox' | 'limits'> = { sandbox: { mode: 'off', network: false, writable: [] }, limits: {} };

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
  let groupGone = false;
  let outputClosed = false;
  let drainTimer: NodeJS.Timeout | undefined;
  let timeoutTimer: NodeJS.Timeout | undefined;
  let launched: Launched | undefined;

  let plan: LaunchPlan | undefined;
  let init: SandboxInit | undefined;
  let finished = false;
  const finish = (error?: string) => {
    if (finished) return;
    finished = true;
    clearTimeout(drainTimer);
    clearTimeout(timeoutTimer);
    launched?.release();
    init?.release();
    const end = { exitCode: exited?.code ?? null, signal: exited?.signal ?? null };
    session.finish({ ...end, error, reason: plan && limitReason(end, plan.limits) });
    if (!session.stop && session.pid !== undefined) sweepAfterExit(session.id, session.pid, session.startedAt, opts.killGraceMs);
  };
  const maybeFinish = () => {
    if (exited && groupGone && outputClosed) finish();
  };
  const hooks: LaunchHooks = {
    output: (stream, chunk) => session.onOutput(stream, chunk),
    failed: (message) => finish(message),
    inputClosed: () => (session.stdinOpen = false),
    closed: () => {
      outputClosed = true;
      maybeFinish();
    },
    exit: (code, signal) => {
      exited = plan?.sandboxed ? jobStatus(code, signal) : { code, signal };
      const reap = () => reapLeftovers(session, launched?.pid, opts.killGraceMs, plan?.sandboxed ?? false);
      // In a sandbox, its init says at once whether anything of the job is left.
      void (init?.gone() ? Promise.resolve() : reap()).then(() => {
        groupGone = true;
        if (outputClosed) return maybeFinish();
        // Only a process that escaped the group can still hold the output open: stop waiting.
        drainTimer = setTimeout(() => {
          launched?.detachOutput();
          outputClosed = true;
          maybeFinish();
        }, PIPE_DRAIN_MS);
      });
    },
  };

  const confine = { config: opts.config ?? UNCONFINED, elevated: opts.elevated ?? false };
  let env = opts.env;
  try {
    const user = sessionUser(confine);
    if (user) env = runAs(session, user, env);
    plan = planLaunch(confine, { shell: opts.shell, args: shellArgs(opts.shell, session.command), cwd: session.cwd, scratch: session.tmpdir, socket: env.PROCCTL_SOCKET }, user);
  } catch (err) {
    finish(`${(err as Error).message}; nothing ran`);
    return undefined;
  }
  const spec = { plan, cwd: session.cwd, env, stdin: session.stdinMode };
  let warning: string | undefined;
  if (opts.pty) {
    try {
      launched = launchPty(spec, hooks);
      session.pty = true;
    } catch (err) {
      warning = `a pseudo-terminal could not be created (${(err as Error).message}); the command runs on pipes`;
    }
  }
  launched ??= launchPipes(spec, hooks);
  session.pid = launched.pid;
  if (plan.sandboxed && launched.pid !== undefined) init = new SandboxInit(launched.pid);
  session.input = launched.input;
  session.stdinId = launched.stdinId;
  if (session.pty && session.stdinMode === 'null') {
    // A terminal always has input; "null" means the job reads end-of-input at once.
    launched.input?.end();
    session.stdinOpen = false;
  }
  session.resize = launched.resize;

  if (launched.pid !== undefined && opts.timeoutSec > 0) {
    timeoutTimer = setTimeout(() => {
      void stopSession(session, { reason: 'timeout', signal: 'SIGTERM', graceMs: opts.killGraceMs });
    }, opts.timeoutSec * 1000);
  }
  return warning;
}

/**
 * Ready a session to run as sandbox.user: a workdir it can enter (or an error saying why not),
 * a scratch directory and stop file of its own, and its HOME, USER and LOGNAME. Returns the
 * session's environment.
 */
function runAs(session: Session, user: RunAs, env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  const refused = accessProblem(session.cwd, user);
  if (refused) throw new Error(refused);
  if (session.tmpdir) {
    session.tmpdir = scratchFor(user, session.tmpdir);
    session.stopFile = join(session.tmpdir, basename(session.stopFile ?? 'stop.json'));
  }
  stopFileOwner(session, user);
  return { ...env, HOME: user.home, USER: user.name, LOGNAME: user.name, PROCCTL_TMPDIR: session.tmpdir, PROCCTL_STOP_FILE: session.stopFile };
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
  if (session.stopping) {
    // The stop in progress escalates on its own schedule; no process gets its signal twice.
    await waitGroupGone(pgid, graceMs + 6000);
    return;
  }
  session.stopping = true;
  const outside = sandboxed ? (findSessionProcesses(new Set([session.id]), pgid).get(session.id) ?? []).filter((p) => p.pgrp !== pgid).map((p) => p.pid) : [];
  await terminate({ pgid, pids: outside }, 'SIGTERM', graceMs);
}
