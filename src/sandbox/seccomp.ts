import { closeSync } from 'node:fs';
import { addonFix, loadAddon } from '../base/addon.js';

interface SeccompAddon {
  seccompFilter(): number;
}

/**
 * A descriptor holding the sandbox's seccomp filter (native/seccomp.c, built by libseccomp),
 * for bwrap's `--seccomp FD`: Unix sockets cannot be made inside, so no socket on the host is a
 * way out (SPEC §12). A fresh descriptor per session, read by bwrap; the caller closes its own.
 * Throws an Error saying why it cannot be had on this host.
 */
export function unixSocketFilter(): number {
  const addon = loadAddon<SeccompAddon>(['seccompFilter']);
  if (addon instanceof Error) throw new Error(`the sandbox's seccomp filter needs procctl's addon: ${addon.message}; ${addonFix()}`);
  return addon.seccompFilter();
}

/** Why the filter cannot be made here, or undefined when it can. */
export function filterProblem(): string | undefined {
  try {
    closeSync(unixSocketFilter());
    return undefined;
  } catch (err) {
    return `${(err as Error).message}; or set sandbox.allowUnixSockets: true to run sandboxed jobs without the filter (a readable host socket is then a way out)`;
  }
}
