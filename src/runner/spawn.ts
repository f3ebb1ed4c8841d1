import type { Session } from '../session/session.js';
import { liveGroupMembers, terminate, waitGroupGone } from './group.js';
import { launchPipes, launchPty, type LaunchHooks, type Launched } from './launch.js';
import { shellArgs } from './shell.js';
import { stopSession } from './stop.js';
import { sweepAfterExit } from './sweep.js';

export interface SpawnOptions {
  shell: string;
  env: NodeJS.ProcessEnv;
  /** Seconds; 0 = none. */
  timeoutSec: number;
  killGraceMs: number;
  pty: boolean;
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
  let groupGone = false;
  let outputClosed = false;
  let drainTimer: NodeJS.Timeout | undefined;
  let timeoutTimer: NodeJS.Timeout | undefined;
  let launched: Launched | undefined;

  let finished = false;
  const finish = (error?: string) => {
    if (finished) return;
    finished = true;
    clearTimeout(drainTimer);
    clearTimeout(timeoutTimer);
    launched?.release();
    session.finish({ exitCode: exited?.code ?? null, signal: exited?.signal ?? null, error });
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
      exited = { code, signal };
      void reapLeftovers(session, launched?.pid, opts.killGraceMs).then(() => {
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

  const spec = { shell: opts.shell, args: shellArgs(opts.shell, session.command), cwd: session.cwd, env: opts.env, stdin: session.stdinMode };
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

/** After the leader exits, terminate what is left of its group (unless a stop already is). */
async function reapLeftovers(session: Session, pgid: number | undefined, graceMs: number): Promise<void> {
  if (pgid === undefined || liveGroupMembers(pgid).length === 0) return;
  if (session.stopping) {
    // The stop in progress escalates on its own schedule; no process gets its signal twice.
    await waitGroupGone(pgid, graceMs + 6000);
    return;
  }
  session.stopping = true;
  await terminate({ pgid, pids: [] }, 'SIGTERM', graceMs);
}
