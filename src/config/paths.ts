import { statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** The user's runtime directory as systemd's user manager makes it, when it exists and is ours. */
function runUserDir(): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  const dir = `/run/user/${uid}`;
  try {
    const st = statSync(dir);
    return st.isDirectory() && st.uid === uid ? dir : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Socket path, first that applies (SPEC §2): flag, $PROCCTL_SOCKET, $XDG_RUNTIME_DIR,
 * /run/user/UID (ours), the temp dir. /run/user/UID before the temp dir, so a client started
 * with a stripped environment (an MCP client, cron) finds the same socket as the user's shell.
 */
export function resolveSocketPath(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag) return flag;
  if (env.PROCCTL_SOCKET) return env.PROCCTL_SOCKET;
  const runtime = env.XDG_RUNTIME_DIR || runUserDir();
  if (runtime) return join(runtime, 'procctl', 'procctl.sock');
  return join(tmpdir(), `procctl-${process.getuid?.() ?? 'user'}`, 'procctl.sock');
}

/**
 * Why the socket's directory may not be used, or undefined when it is ours (SPEC §2): it must be
 * owned by this uid and not writable by group or others, as tmux and ssh-agent insist, or someone
 * else could swap the socket, plant a symlink where the log goes, or read a job's scratch files.
 */
export function socketDirProblem(dir: string): string | undefined {
  let st;
  try {
    st = statSync(dir);
  } catch {
    return undefined; // made by us, 0700
  }
  const uid = process.getuid?.();
  if (uid !== undefined && st.uid !== uid) {
    return `the socket directory ${dir} belongs to uid ${st.uid}, not to this user (uid ${uid}): someone else could swap the socket; remove it, or pass --socket PATH in a directory of your own`;
  }
  if ((st.mode & 0o022) !== 0) {
    return `the socket directory ${dir} is writable by ${(st.mode & 0o002) !== 0 ? 'everyone' : 'its group'} (mode ${(st.mode & 0o7777).toString(8)}): someone else could swap the socket; chmod 700 ${dir}, or pass --socket PATH in a directory of your own`;
  }
  return undefined;
}
