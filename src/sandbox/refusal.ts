import { readFileSync } from 'node:fs';

/** What this host says about user namespaces, read from /proc (the daemon's own view). */
export interface NamespaceFacts {
  /** user.max_user_namespaces: 0 turns them off for everyone. */
  maxUserNamespaces?: number;
  /** kernel.unprivileged_userns_clone (Debian's older kernels): 0 refuses them to non-root users. */
  unprivilegedClone?: number;
  /** kernel.apparmor_restrict_unprivileged_userns (Ubuntu 23.10 and later): 1 lets only programs with an AppArmor profile that allows `userns` have them. */
  apparmorRestrict?: number;
  /** The daemon runs under a seccomp filter (`Seccomp: 2` in /proc/self/status): a container's profile, or a unit's SystemCallFilter/RestrictNamespaces. */
  seccompFiltered: boolean;
  root: boolean;
}

/**
 * The sysctls bwrap's user namespaces depend on, under /proc, by the fact each gives: read here
 * for the advice, and by the host's print (sandbox/host-print.ts) to notice one set.
 */
export const USERNS_SYSCTLS = {
  maxUserNamespaces: 'sys/user/max_user_namespaces',
  unprivilegedClone: 'sys/kernel/unprivileged_userns_clone',
  apparmorRestrict: 'sys/kernel/apparmor_restrict_unprivileged_userns',
} as const;

/** Read the facts from `proc` (a directory laid out as /proc). */
export function namespaceFacts(proc = '/proc', root = process.getuid?.() === 0): NamespaceFacts {
  const num = (path: string): number | undefined => {
    try {
      const n = Number(readFileSync(`${proc}/${path}`, 'latin1').trim());
      return Number.isFinite(n) ? n : undefined;
    } catch {
      return undefined;
    }
  };
  let seccompFiltered = false;
  try {
    seccompFiltered = /^Seccomp:\s*2$/m.test(readFileSync(`${proc}/self/status`, 'latin1'));
  } catch {
    // not Linux, or no /proc
  }
  return {
    maxUserNamespaces: num(USERNS_SYSCTLS.maxUserNamespaces),
    unprivilegedClone: num(USERNS_SYSCTLS.unprivilegedClone),
    apparmorRestrict: num(USERNS_SYSCTLS.apparmorRestrict),
    seccompFiltered,
    root,
  };
}

/**
 * Why bwrap could not make its namespaces here and what fixes it, for the common cases: user
 * namespaces turned off (max_user_namespaces 0, unprivileged_userns_clone 0), Ubuntu's AppArmor
 * restriction, a seccomp filter around the daemon (a container's default profile, a unit's
 * RestrictNamespaces). `said` is bwrap's own line. Undefined when nothing here explains it.
 */
export function namespaceAdvice(said: string, f: NamespaceFacts): string | undefined {
  const refused = /namespace|permission denied|operation not permitted|no space left|uid map|RTM_NEWADDR/i.test(said);
  if (!refused) return undefined;
  if (f.maxUserNamespaces === 0) {
    return 'user namespaces are turned off on this host (user.max_user_namespaces = 0): allow them with `sysctl -w user.max_user_namespaces=15000` (and in /etc/sysctl.d/ to keep it)';
  }
  if (f.unprivilegedClone === 0 && !f.root) {
    return 'this kernel refuses user namespaces to users other than root (kernel.unprivileged_userns_clone = 0): allow them with `sysctl -w kernel.unprivileged_userns_clone=1` (and in /etc/sysctl.d/), or run the daemon as root';
  }
  if (f.apparmorRestrict === 1 && !f.root) {
    return (
      "AppArmor restricts user namespaces to programs with a profile that allows them (kernel.apparmor_restrict_unprivileged_userns = 1, Ubuntu 23.10 and later): " +
      'give bwrap one (/etc/apparmor.d/bwrap, as docs/sandbox.md shows, then `apparmor_parser -r /etc/apparmor.d/bwrap`), or set the sysctl to 0, or run the daemon as root'
    );
  }
  if (f.seccompFiltered) {
    return (
      'the daemon runs under a seccomp filter that forbids creating namespaces: a container\'s default profile (Docker, Podman) or the unit\'s RestrictNamespaces=/SystemCallFilter=. ' +
      'Run the container with a profile that allows clone/unshare of user namespaces (docker run --security-opt seccomp=unconfined, or a custom profile), or run procctl on the host; in a unit, take RestrictNamespaces= out'
    );
  }
  return undefined;
}
