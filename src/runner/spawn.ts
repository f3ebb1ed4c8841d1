import { spawn, type ChildProcess } from 'node:child_process';
import type { Session } from '../session/session.js';
import { liveGroupMembers, terminate, waitGroupGone } from './group.js';
import { shellArgs } from './shell.js';
import { sweepAfterExit } from './sweep.js';
import { stopSession } from './stop.js';

export interface SpawnOptions {
  shell: string;
  env: NodeJS.ProcessEnv;
  /** Seconds; 0 = none. */
  timeoutSec: number;
  killGraceMs: number;
}

/** How long to wait for the output pipes to close once every process of the group is gone. */
const PIPE_DRAIN_MS = 250;

/**
 * Start the session's command in a process group of its own and wire the process to the session.
 * The session ends when its leader exits and nothing of its group is left: leftovers get the
 * stop signal, the grace, then SIGKILL, so `cmd &` can neither orphan a process nor keep the
 * session running.
 */
export function spawnSession(session: Session, opts: SpawnOptions): void {
  let child: ChildProcess;
  try {
    child = spawn(opts.shell, shellArgs(opts.shell, session.command), {
      cwd: session.cwd,
      env: opts.env,
      detached: true,
      stdio: [session.stdinMode === 'pipe' ? 'pipe' : 'ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    session.finish({ exitCode: null, signal: null, error: `could not start ${opts.shell}: ${(err as Error).message}` });
    return;
  }
  session.child = child;
  session.pid = child.pid;

  let exited: { code: number | null; signal: string | null } | undefined;
  let groupGone = false;
  let pipesClosed = false;
  let drainTimer: NodeJS.Timeout | undefined;
  let timeoutTimer: NodeJS.Timeout | undefined;

  const finish = (error?: string) => {
    clearTimeout(drainTimer);
    clearTimeout(timeoutTimer);
    session.finish({ exitCode: exited?.code ?? null, signal: exited?.signal ?? null, error });
    if (!session.stop) sweepAfterExit(session.id, opts.killGraceMs);
  };
  const maybeFinish = () => {
    if (exited && groupGone && pipesClosed) finish();
  };

  child.stdout!.on('data', (chunk: Buffer) => session.onOutput('stdout', chunk));
  child.stderr!.on('data', (chunk: Buffer) => session.onOutput('stderr', chunk));
  if (child.stdin) {
    session.stdin = child.stdin;
    // A job that exits or closes its stdin turns our writes into EPIPE: that only closes stdin.
    child.stdin.on('error', () => (session.stdinOpen = false));
    child.stdin.on('close', () => (session.stdinOpen = false));
  }

  child.on('error', (err) => {
    if (child.pid === undefined) finish(`could not start ${opts.shell}: ${err.message}`);
  });
  child.on('close', () => {
    pipesClosed = true;
    maybeFinish();
  });
  child.on('exit', (code, signal) => {
    exited = { code, signal };
    void reapLeftovers(session, child.pid!, opts.killGraceMs).then(() => {
      groupGone = true;
      if (pipesClosed) return maybeFinish();
      // Only a process that escaped the group can still hold the pipes: stop waiting for them.
      drainTimer = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        pipesClosed = true;
        maybeFinish();
      }, PIPE_DRAIN_MS);
    });
  });

  if (child.pid !== undefined && opts.timeoutSec > 0) {
    timeoutTimer = setTimeout(() => {
      void stopSession(session, { reason: 'timeout', signal: 'SIGTERM', graceMs: opts.killGraceMs });
    }, opts.timeoutSec * 1000);
  }
}

/** After the leader exits, terminate what is left of its group (unless a stop already is). */
async function reapLeftovers(session: Session, pgid: number, graceMs: number): Promise<void> {
  if (liveGroupMembers(pgid).length === 0) return;
  if (session.stopping) {
    // The stop in progress escalates on its own schedule; no process gets its signal twice.
    await waitGroupGone(pgid, graceMs + 6000);
    return;
  }
  session.stopping = true;
  await terminate({ pgid, pids: [] }, 'SIGTERM', graceMs);
}
