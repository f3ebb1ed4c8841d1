import { readFileSync } from 'node:fs';
import { resolveSocketPath } from '../config/paths.js';

/**
 * The approver credential a person's client sends when it answers an approval (SPEC §8):
 * `$PROCCTL_APPROVER_TOKEN` (the configured approvals.approverToken, or for a daemon on another
 * host), else the one the local daemon made beside its socket. Undefined when neither is there.
 */
export function approverCredential(socket: string | undefined, env: NodeJS.ProcessEnv = process.env): string | undefined {
  if (env.PROCCTL_APPROVER_TOKEN) return env.PROCCTL_APPROVER_TOKEN;
  try {
    return readFileSync(`${resolveSocketPath(socket, env)}.approver`, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}
