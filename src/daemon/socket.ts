import { chmodSync, lstatSync, mkdirSync, statSync, unlinkSync, type Stats } from 'node:fs';
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
 * Listen on the path: its directory made 0700, the socket 0600, a stale socket file replaced,
 * and a live one (another daemon) refused.
 */
export async function listenOnPath(server: Server, path: string): Promise<void> {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const st = statSync(dir);
  // Tighten our own directory; never a shared one such as /tmp (sticky bit).
  if (st.uid === process.getuid?.() && (st.mode & 0o077) !== 0 && (st.mode & 0o1000) === 0) chmodSync(dir, 0o700);
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

