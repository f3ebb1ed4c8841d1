import { delimiter } from 'node:path';
import { findProgram } from '../base/executable.js';

/**
 * The programs the sandbox, the limits, sandbox.user and review mode run, each found on the
 * daemon's PATH (sandbox/host.ts, sandbox/overlay.ts). The host's print (sandbox/host-print.ts)
 * looks at the same list, so a check is made again when any of them changes.
 */
export const PROGRAMS = ['bwrap', 'env', 'prlimit', 'setpriv', 'unshare', 'mount', 'getent', 'id'] as const;
export type Program = (typeof PROGRAMS)[number];

/** `cmd` as found on PATH, like a shell would (a name with a `/` is never looked up). */
export function which(cmd: string, path: string | undefined): string | undefined {
  return cmd.includes('/') ? undefined : findProgram(cmd, (path ?? '').split(delimiter).filter(Boolean).join(delimiter));
}

/** Where PATH finds each of PROGRAMS now. */
export function findPrograms(path: string | undefined): Record<Program, string | undefined> {
  const found = {} as Record<Program, string | undefined>;
  for (const name of PROGRAMS) found[name] = which(name, path);
  return found;
}
