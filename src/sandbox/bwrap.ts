import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import { constants } from 'node:os';
import type { Protected } from './protect.js';

export type SandboxMode = 'workspace-write' | 'read-only';

/** Where one session's sandbox puts things. */
export interface SandboxLayout {
  mode: SandboxMode;
  network: boolean;
  workdir: string;
  /** PROCCTL_TMPDIR: the session's scratch directory, which holds its stop file. */
  scratch: string | undefined;
  /** The daemon's own paths (its socket and runtime directory, state directory, config, log, approver credential): hidden inside. */
  hidden: readonly string[];
  /** The trees the job may write (workspace-write): the workspaces and `sandbox.writable`, resolved. */
  writable: readonly string[];
  /** Paths inside those trees kept read-only (`sandbox.protect`, found when the session starts; sandbox/protect.ts). */
  protect: readonly Protected[];
  /** Size of the private /tmp and /dev/shm. */
  tmpBytes: number;
  /** bwrap runs as root: drop every capability, or root in the sandbox could remount `/` writable. */
  asRoot: boolean;
  /** The job becomes sandbox.user inside (setpriv): keep just the two capabilities that takes. */
  asUser?: boolean;
  /** Seen read-only inside even where the private /tmp hides them: procctl's own code, when a network-by-name helper runs from it. */
  seen?: readonly string[];
}

type Kind = 'dir' | 'file' | undefined;

function kindOf(path: string): Kind {
  try {
    const st = statSync(path);
    return st.isDirectory() ? 'dir' : 'file';
  } catch {
    return undefined;
  }
}

/** `path` is `root` or lies under it. */
export function under(path: string, root: string): boolean {
  return path === root || path.startsWith(root.endsWith('/') ? root : `${root}/`);
}

/** What the sandbox replaces with its own: anything there must be bound in again to be seen. */
const PRIVATE = ['/tmp', '/dev', '/proc'];
/** The private trees a file of the daemon's may sit in (its socket under /tmp, for one). */
const PRIVATE_TMP = ['/tmp', '/dev/shm'];

/**
 * The bwrap options of a session's sandbox (SPEC §12), up to `--`. The whole filesystem is read
 * only; a private /tmp, /dev/shm (of `tmpBytes`), /dev and /proc; the daemon's own paths hidden
 * (empty); writable: the workspaces and `sandbox.writable` (workspace-write) less what
 * `sandbox.protect` keeps read-only in them, and always the scratch directory. Not used, on purpose:
 *  - `--new-session`: the job would leave the session's process group, which every stop signals.
 *    The job has no terminal to abuse (pipes have none; a pty session's terminal is its own).
 *  - `--as-pid-1`: the job's shell would be PID 1 of the namespace, which ignores SIGTERM unless
 *    it installs a handler. bwrap's own init is PID 1 and reaps; the shell is an ordinary process.
 *  - `--die-with-parent`: when the job's shell exits before the rest of its group, the outer
 *    bwrap exits too; its namespace must live on so the leftovers get the grace, not a SIGKILL.
 */
export function bwrapOptions(s: SandboxLayout, kind: (p: string) => Kind = kindOf): string[] {
  const hiddenDirs = s.hidden.filter((p) => kind(p) === 'dir');
  // Directories bwrap makes for a mount point in a tmpfs of its own are root's 0700: make them passable first.
  const made = new Set<string>();
  const reach = (path: string): string[] => {
    const out: string[] = [];
    const root = ['/tmp', ...hiddenDirs].find((r) => under(path, r) && path !== r);
    if (!root) return out;
    for (let d = dirname(path); d !== root && d !== '/' && !made.has(d); d = dirname(d)) {
      made.add(d);
      out.unshift('--perms', '0755', '--dir', d);
    }
    return out;
  };
  const size = String(s.tmpBytes);
  // /tmp and /dev/shm as on a host (1777), so a job that is not root can use them too.
  const privates = ['--dev', '/dev', '--perms', '1777', '--size', size, '--tmpfs', '/dev/shm', '--proc', '/proc', '--perms', '1777', '--size', size, '--tmpfs', '/tmp'];
  const args = ['--ro-bind', '/', '/', ...privates];
  const writable = s.mode === 'workspace-write' ? s.writable : [];
  for (const path of writable) args.push(...reach(path), '--bind', path, path);
  // A read-only workdir under the private /tmp is bound in again, to be seen.
  if (!writable.some((w) => under(s.workdir, w)) && PRIVATE.some((p) => under(s.workdir, p))) args.push(...reach(s.workdir), '--ro-bind', s.workdir, s.workdir);
  if (writable.length > 0) {
    for (const { path, how } of s.protect) {
      if (how === 'pin') args.push('--bind', path, path);
      else if (how === 'ro') args.push('--ro-bind', path, path);
      else args.push('--tmpfs', path, '--remount-ro', path);
    }
  }
  // The whole filesystem was the writable one: the private mounts again, over it.
  if (writable.some((w) => PRIVATE.some((p) => under(p, w)))) args.push(...privates);
  // The daemon's controls, after everything that could expose them: an empty directory, an empty
  // file. One already under the private /tmp is not there to hide, unless a bind brought it back.
  const rebound = [...writable, ...(PRIVATE.some((p) => under(s.workdir, p)) ? [s.workdir] : [])];
  for (const path of s.hidden) {
    if (PRIVATE_TMP.some((p) => under(path, p)) && !rebound.some((b) => under(path, b))) continue;
    const what = kind(path);
    if (what === 'dir') args.push('--perms', '0755', '--tmpfs', path);
    else if (what === 'file') args.push('--ro-bind', '/dev/null', path);
  }
  if (s.scratch) args.push(...reach(s.scratch), '--bind', s.scratch, s.scratch);
  for (const path of s.seen ?? []) if (PRIVATE.some((p) => under(path, p))) args.push(...reach(path), '--ro-bind', path, path);
  args.push('--chdir', s.workdir, '--unshare-pid', '--unshare-ipc');
  if (!s.network) args.push('--unshare-net');
  if (s.asRoot) args.push('--cap-drop', 'ALL');
  // setpriv needs these to become the user; becoming it drops them (and setpriv clears the inheritable set).
  if (s.asRoot && s.asUser) args.push('--cap-add', 'CAP_SETUID', '--cap-add', 'CAP_SETGID');
  return args;
}

/**
 * Signals the sandbox's own processes (the outer bwrap, the session's group leader) ignore:
 * every signal whose default would end or stop them. A stop, Ctrl-C on a terminal or `process
 * signal` reaches the whole group; the job decides what it does, and bwrap lives until the job is
 * gone and then reports how it ended. The job itself starts with every signal at its default
 * (`env --default-signal`). SIGKILL still ends everything.
 */
export const SANDBOX_IGNORES = [
  'SIGHUP', 'SIGINT', 'SIGQUIT', 'SIGUSR1', 'SIGUSR2', 'SIGPIPE', 'SIGALRM', 'SIGTERM', 'SIGSTKFLT',
  'SIGTSTP', 'SIGTTIN', 'SIGTTOU', 'SIGXCPU', 'SIGXFSZ', 'SIGVTALRM', 'SIGPROF', 'SIGIO', 'SIGPWR',
] as const;

export const SANDBOX_IGNORE_NUMBERS = SANDBOX_IGNORES.map((name) => constants.signals[name as keyof typeof constants.signals]).filter((n) => n !== undefined);
