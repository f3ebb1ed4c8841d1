import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { constants } from 'node:os';

export type SandboxMode = 'workspace-write' | 'read-only';

/** Where one session's sandbox puts things. */
export interface SandboxLayout {
  mode: SandboxMode;
  network: boolean;
  workdir: string;
  /** PROCCTL_TMPDIR: the session's scratch directory, which holds its stop file. */
  scratch: string | undefined;
  /** The daemon's socket, for `procctl checkpoint` from inside. */
  socket: string | undefined;
  /** `sandbox.writable`. */
  writable: readonly string[];
  /** bwrap runs as root: drop every capability, or root in the sandbox could remount `/` writable. */
  asRoot: boolean;
  /** The job becomes sandbox.user inside (setpriv): keep just the two capabilities that takes. */
  asUser?: boolean;
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

/**
 * Keep a writable tree's git hooks and config read-only: a job that could write them would run
 * code outside the sandbox the next time someone runs git there. `.git` itself becomes a mount
 * point (bound onto itself, still writable), so it cannot be renamed away and replaced.
 */
function protectGit(root: string, kind: (p: string) => Kind): string[] {
  const git = join(root, '.git');
  const what = kind(git);
  // A worktree's or submodule's `.git` file names its git directory: keep it pointing there.
  if (what === 'file') return ['--ro-bind', git, git];
  if (what !== 'dir') return [];
  const hooks = join(git, 'hooks');
  const config = join(git, 'config');
  const out = ['--bind', git, git];
  // No hooks directory yet: an empty read-only one in its place, so none can be added.
  out.push(...(kind(hooks) === 'dir' ? ['--ro-bind', hooks, hooks] : ['--tmpfs', hooks, '--remount-ro', hooks]));
  if (kind(config) === 'file') out.push('--ro-bind', config, config);
  return out;
}

/**
 * The bwrap options of a session's sandbox (SPEC §12), up to `--`. The whole filesystem is read
 * only; a private /tmp, /dev and /proc; writable: the workdir and `sandbox.writable`
 * (workspace-write), and always the scratch directory. Not used, on purpose:
 *  - `--new-session`: the job would leave the session's process group, which every stop signals.
 *    The job has no terminal to abuse (pipes have none; a pty session's terminal is its own).
 *  - `--as-pid-1`: the job's shell would be PID 1 of the namespace, which ignores SIGTERM unless
 *    it installs a handler. bwrap's own init is PID 1 and reaps; the shell is an ordinary process.
 *  - `--die-with-parent`: when the job's shell exits before the rest of its group, the outer
 *    bwrap exits too; its namespace must live on so the leftovers get the grace, not a SIGKILL.
 */
export function bwrapOptions(s: SandboxLayout, kind: (p: string) => Kind = kindOf): string[] {
  // Directories bwrap makes for a mount point under /tmp are root's 0700: make them passable first.
  const made = new Set<string>();
  const reach = (path: string): string[] => {
    const out: string[] = [];
    if (!under(path, '/tmp')) return out;
    for (let d = dirname(path); d !== '/tmp' && d !== '/' && !made.has(d); d = dirname(d)) {
      made.add(d);
      out.unshift('--perms', '0755', '--dir', d);
    }
    return out;
  };
  // /tmp and /dev/shm as on a host (1777), so a job that is not root can use them too.
  const privates = ['--dev', '/dev', '--perms', '1777', '--tmpfs', '/dev/shm', '--proc', '/proc', '--perms', '1777', '--tmpfs', '/tmp'];
  const args = ['--ro-bind', '/', '/', ...privates];
  const writable = s.mode === 'workspace-write' ? [s.workdir, ...s.writable] : [];
  for (const path of writable) args.push(...reach(path), '--bind', path, path);
  // A read-only workdir under the private /tmp is bound in again, to be seen.
  if (s.mode === 'read-only' && PRIVATE.some((p) => under(s.workdir, p))) args.push(...reach(s.workdir), '--ro-bind', s.workdir, s.workdir);
  for (const path of writable) args.push(...protectGit(path, kind));
  // The whole filesystem was the writable one: the private mounts again, over it.
  if (writable.some((w) => PRIVATE.some((p) => under(p, w)))) args.push(...privates);
  if (s.scratch) args.push(...reach(s.scratch), '--bind', s.scratch, s.scratch);
  if (s.socket && PRIVATE.some((p) => under(s.socket!, p)) && !writable.some((w) => under(s.socket!, w))) {
    args.push(...reach(s.socket), '--ro-bind', s.socket, s.socket);
  }
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
