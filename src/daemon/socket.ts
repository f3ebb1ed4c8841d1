import { chmodSync, lstatSync, mkdirSync, statSync, unlinkSync, type Stats } from 'node:fs';
import { socketDirProblem } from '../config/paths.js';
import { connect, type Server, type Socket } from 'node:net';
import { dirname } from 'node:path';

export class SocketInUseError extends Error {}

function lstatOrUndefined(path: string): Stats | undefined {
  try {
    return lstatSync(path);
  } catch {
    return undefined;
  }
}

/** Is something answering on this socket path? */
function probe(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s: Socket = connect(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Listen on the path: its directory ours (made 0700; one owned by another uid or writable by
 * others refused, naming it), the socket 0600, a stale socket file replaced, and a live one
 * (another daemon) refused.
 */
export async function listenOnPath(server: Server, path: string, beforeListen: () => void = () => undefined): Promise<void> {
  const dir = dirname(path);
  // A directory someone else owns or may write is refused: nothing in it is used or followed.
  const problem = socketDirProblem(dir);
  if (problem) throw new SocketInUseError(problem);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  // Ours, and writable by nobody else: tighten it so no one else can even look in.
  if ((statSync(dir).mode & 0o077) !== 0) chmodSync(dir, 0o700);
  const existing = lstatOrUndefined(path);
  if (existing && !existing.isSocket()) {
    throw new SocketInUseError(`${path} exists and is not a socket; remove it or pass another --socket PATH`);
  }
  if (await probe(path)) {
    throw new SocketInUseError(
      `another procctld is already listening on ${path}; stop it first (procctl status shows its pid) or pass --socket PATH`,
    );
  }
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  // The path is this daemon's now: what a client may read as soon as it can connect is made here.
  beforeListen();
  const oldMask = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(path, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(oldMask);
  }
  chmodSync(path, 0o600);
}

