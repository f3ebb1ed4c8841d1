import { spawn } from 'node:child_process';
import { closeSync, constants, mkdirSync, openSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { resolveSocketPath, socketDirProblem } from '../config/paths.js';
import { DaemonClient, DaemonUnreachableError } from '../rpc/client.js';
import { dialFor } from '../remote/reach.js';
import { DAEMON_NODE_FLAGS } from '../base/node-flags.js';

/** procctld of this same install. */
const PROCCTLD = fileURLToPath(new URL('../../../bin/procctld', import.meta.url));
/** How long a daemon started here gets to listen. */
const START_DEADLINE_MS = 15_000;

export interface Reached {
  client: DaemonClient;
  /** Set when no daemon was listening and one was started: its pid and where it logs. */
  started?: { pid: number; log: string };
}

/**
 * Connect to the daemon; if none listens (no socket, or nothing behind it), start one of this
 * install, detached (its own session, so it outlives this process and its terminal), logging
 * beside its socket, and connect once it listens. Any other failure (permissions, a socket
 * that is not one) is not a missing daemon, and is thrown as it is.
 */
export async function connectOrStart(socket: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<Reached> {
  try {
    return { client: await DaemonClient.over(await dialFor({ socket, env })) };
  } catch (err) {
    if (!(err instanceof DaemonUnreachableError) || !(err.code === 'ENOENT' || err.code === 'ECONNREFUSED')) throw err;
  }
  const path = resolveSocketPath(socket, env);
  // The log goes beside the socket: only in a directory of ours, and never through a planted symlink.
  const problem = socketDirProblem(dirname(path));
  if (problem) throw new Error(problem);
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
  const log = join(dirname(path), 'procctld.log');
  const fd = openSync(log, constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
  let pid: number | undefined;
  let exited: string | undefined;
  try {
    const child = spawn(process.execPath, [...DAEMON_NODE_FLAGS, PROCCTLD, '--socket', path], { detached: true, stdio: ['ignore', fd, fd], env });
    pid = child.pid;
    child.once('exit', (code, signal) => (exited = signal ? `killed by ${signal}` : `exit status ${code}`));
    child.unref();
  } finally {
    closeSync(fd);
  }
  const deadline = Date.now() + START_DEADLINE_MS;
  for (let wait = 20; ; wait = Math.min(wait * 2, 250)) {
    try {
      return { client: await DaemonClient.over(await dialFor({ socket: path, env })), started: { pid: pid!, log } };
    } catch (err) {
      if (exited !== undefined) throw new Error(`started procctld but it ended (${exited}); its log is ${log}`);
      if (Date.now() > deadline) throw new Error(`started procctld (pid ${pid}) but it did not listen on ${path} within ${START_DEADLINE_MS / 1000} s; its log is ${log}`, { cause: err });
    }
    await new Promise((r) => setTimeout(r, wait));
  }
}
