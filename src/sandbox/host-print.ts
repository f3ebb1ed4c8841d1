import { readFileSync, statSync } from 'node:fs';
import { findPrograms, PROGRAMS, type Program } from './programs.js';
import { USERNS_SYSCTLS } from './refusal.js';

/**
 * What a sandbox check (and review mode's overlay probe) depends on in the host, not in the
 * config: which programs the daemon's PATH finds and which file each is (a package installed,
 * upgraded or removed after the daemon started changes one), and the sysctls that allow user
 * namespaces. A check is made again when this changes, so daemon.status and the next exec say
 * what the host offers now, without a reload. The programs and the sysctls are those the check
 * itself uses (sandbox/programs.ts, sandbox/refusal.ts), and a check takes the programs from the
 * same look, so what it uses is what the print saw.
 */

/**
 * How long a print is trusted before the host is looked at again: daemon.status is asked after
 * every poll by some clients (1,000 sessions), so the system calls of a look (one per PATH
 * directory tried, ~100) are made at most this often, on a call, never by a timer. A call that
 * finds it older is answered with it, and the host is looked at once that call's turn is over:
 * an agent's exec comes seconds after the last one, and a look on its way took 0.5 ms of the
 * daemon's thread there (docs/benchmarks.md, the exec round trip as agents ask). The next call
 * after a change sees it.
 */
export const HOST_RECHECK_MS = 2000;

/** One look at the host: its print, and where PATH found each program. */
export interface HostLook {
  print: string;
  programs: Record<Program, string | undefined>;
}

let seen: { path: string | undefined; at: number; look: HostLook } | undefined;

/** A look due once this turn is over (only one). */
let due: NodeJS.Immediate | undefined;

/**
 * The host as last looked at for this PATH: looked at now the first time (or for another PATH, or
 * after the clock went back), and once older than HOST_RECHECK_MS, again after this turn, or now
 * when `fresh` (a start, a reload, a restart's checks: what they decide stands).
 */
export function hostLook(path = process.env.PATH, now = Date.now(), fresh = false): HostLook {
  if (seen === undefined || seen.path !== path || now < seen.at) return lookNow(path, now);
  if (fresh && now - seen.at >= HOST_RECHECK_MS) return lookNow(path, now);
  if (now - seen.at >= HOST_RECHECK_MS && due === undefined) {
    due = setImmediate(() => {
      due = undefined;
      lookNow(path, now);
    });
  }
  return seen.look;
}

function lookNow(path: string | undefined, now: number): HostLook {
  const programs = findPrograms(path);
  const parts: string[] = [];
  for (const name of PROGRAMS) {
    const file = programs[name];
    const st = file === undefined ? undefined : statSync(file, { throwIfNoEntry: false });
    parts.push(st === undefined ? `${name}:-` : `${name}:${file}:${st.dev}:${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`);
  }
  for (const file of Object.values(USERNS_SYSCTLS)) parts.push(readQuietly(`/proc/${file}`));
  seen = { path, at: now, look: { print: parts.join('\n'), programs } };
  return seen.look;
}

/** The host's print for this PATH: equal strings, the same host (as far as a sandbox check can tell). */
export function hostPrint(path = process.env.PATH, now = Date.now()): string {
  return hostLook(path, now).print;
}

function readQuietly(file: string): string {
  try {
    return readFileSync(file, 'latin1').trim();
  } catch {
    return '-';
  }
}
