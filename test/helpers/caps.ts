import { spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * What this process may do beyond its own files, for the tests that need it: being uid 0 is not
 * enough inside a sandbox or a container (bubblewrap drops every capability; a user namespace
 * maps only some uids). A test checks the capability it needs and skips with the reason.
 */

/** Capability numbers (linux/capability.h). */
export const CAP = { chown: 0, dacOverride: 1, dacReadSearch: 2, fowner: 3, setgid: 6, setuid: 7, setpcap: 8 } as const;
type CapName = keyof typeof CAP;

/** The effective capability set of this process. */
function effective(): bigint {
  const line = readFileSync('/proc/self/status', 'utf8').match(/^CapEff:\s*([0-9a-f]+)$/m);
  return line ? BigInt(`0x${line[1]}`) : 0n;
}

export function hasCap(name: CapName): boolean {
  return (effective() & (1n << BigInt(CAP[name]))) !== 0n;
}

/** Why files cannot be given to uid/gid 65534 here, or undefined when they can (tried on a temp file). */
function chownFails(): string | undefined {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-caps-'));
  try {
    writeFileSync(join(dir, 'f'), '');
    chownSync(join(dir, 'f'), 65534, 65534);
    return undefined;
  } catch (err) {
    return `chown to uid 65534 fails here (${(err as NodeJS.ErrnoException).code})`;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * Why this process cannot run things as another user (sandbox.user, setpriv --reuid), or
 * undefined when it can: it must be uid 0 (the daemon requires it) with CAP_SETUID, CAP_SETGID
 * and CAP_CHOWN, and the kernel must let it hand a file to uid 65534.
 */
export function cannotActAsAnotherUser(): string | undefined {
  if (process.getuid?.() !== 0) return 'they need to run as root (only root can run sessions as another user)';
  const missing = (['setuid', 'setgid', 'chown'] as const).filter((c) => !hasCap(c));
  if (missing.length > 0) return `root here lacks ${missing.map((c) => `CAP_${c.toUpperCase()}`).join(', ')} (a sandbox or container dropped them)`;
  const chown = chownFails();
  if (chown) return `${chown}: a user namespace that does not map that uid`;
  const setpriv = spawnSync('setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', '--', 'true'], { encoding: 'utf8' });
  if (setpriv.status !== 0) return `setpriv cannot become uid 65534 here (${(setpriv.stderr || setpriv.error?.message || '').trim().split('\n').pop()})`;
  return undefined;
}
