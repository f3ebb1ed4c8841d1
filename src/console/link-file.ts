import { randomBytes } from 'node:crypto';
import { closeSync, constants, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { resolveSocketPath, socketDirProblem } from '../config/paths.js';

/**
 * Where a console run as a service (`procctl ui --service`) keeps its link, and where
 * `procctl ui --link` reads it: `ui.url` beside the daemon's socket (`$XDG_RUNTIME_DIR/procctl/`
 * for the user service, `/run/procctl/` for the system one), a directory only its user may enter.
 * Not the journal: anyone in the systemd-journal or adm group reads that.
 */
export function linkFilePath(socket: string | undefined, host: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return join(dirname(resolveSocketPath(host === undefined ? socket : undefined, env)), 'ui.url');
}

/** Replace the link file at once (a reader never sees half a link), 0600 from its first byte, never through a planted name. */
export function writeLinkFile(path: string, url: string): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const problem = socketDirProblem(dir);
  if (problem) throw new Error(`the console's link file cannot go in ${dir}: ${problem.replace(/^the socket directory \S+ /, 'it ')}`);
  const tmp = `${path}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
  try {
    writeSync(fd, `${url}\n`);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
}

export function removeLinkFile(path: string): void {
  rmSync(path, { force: true });
}

/** `procctl ui --link`: the running console's current link, or why there is none. */
export function readLinkFile(path: string): string {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      throw new Error(`no console runs as a service for this daemon (no ${path}): start it (systemctl --user start procctl-ui, after \`procctl daemon install --ui\`), or run \`procctl ui\` for a link of its own`);
    }
    throw err;
  }
}
