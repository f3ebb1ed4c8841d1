import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Socket path, first that applies (SPEC §2): flag, $PROCCTL_SOCKET, $XDG_RUNTIME_DIR, the temp dir. */
export function resolveSocketPath(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (flag) return flag;
  if (env.PROCCTL_SOCKET) return env.PROCCTL_SOCKET;
  if (env.XDG_RUNTIME_DIR) return join(env.XDG_RUNTIME_DIR, 'procctl', 'procctl.sock');
  return join(tmpdir(), `procctl-${process.getuid?.() ?? 'user'}`, 'procctl.sock');
}
