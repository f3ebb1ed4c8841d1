import { readFileSync, statSync } from 'node:fs';
import { delimiter } from 'node:path';
import { findProgram } from '../base/executable.js';

/**
 * What a sandbox check (and review mode's overlay probe) depends on in the host, not in the
 * config: which programs the daemon's PATH finds and which file each is (a package installed,
 * upgraded or removed after the daemon started changes one), and the sysctls that allow user
 * namespaces. A check is made again when this changes, so daemon.status and the next exec say
 * what the host offers now, without a reload.
 */

/** The programs the sandbox, the limits, sandbox.user and review mode run (sandbox/host.ts, sandbox/overlay.ts). */
const PROGRAMS = ['bwrap', 'env', 'prlimit', 'setpriv', 'unshare', 'mount', 'getent', 'id'];
/** The sysctls bwrap's user namespaces depend on (sandbox/refusal.ts reads the same). */
const SYSCTLS = ['/proc/sys/user/max_user_namespaces', '/proc/sys/kernel/unprivileged_userns_clone', '/proc/sys/kernel/apparmor_restrict_unprivileged_userns'];

/**
 * How long a print is trusted before the host is looked at again: daemon.status is asked after
 * every poll by some clients (1,000 sessions), so the system calls of a look (one per PATH
 * directory tried, ~100) are made at most this often, on a call, never by a timer.
 */
export const HOST_RECHECK_MS = 2000;

let seen: { path: string | undefined; at: number; print: string } | undefined;

/** The host's print for this PATH: equal strings, the same host (as far as a sandbox check can tell). */
export function hostPrint(path = process.env.PATH, now = Date.now()): string {
  if (seen !== undefined && seen.path === path && now - seen.at < HOST_RECHECK_MS && now >= seen.at) return seen.print;
  const dirs = (path ?? '').split(delimiter).filter(Boolean).join(delimiter);
  const parts: string[] = [];
  for (const name of PROGRAMS) {
    const file = findProgram(name, dirs);
    const st = file === undefined ? undefined : statSync(file, { throwIfNoEntry: false });
    parts.push(st === undefined ? `${name}:-` : `${name}:${file}:${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`);
  }
  for (const file of SYSCTLS) parts.push(readQuietly(file));
  seen = { path, at: now, print: parts.join('\n') };
  return seen.print;
}

function readQuietly(file: string): string {
  try {
    return readFileSync(file, 'latin1').trim();
  } catch {
    return '-';
  }
}
