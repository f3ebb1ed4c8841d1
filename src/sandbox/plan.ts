import { closeSync } from 'node:fs';
import { dirname } from 'node:path';
import { packageRoot } from '../base/addon.js';
import type { Config } from '../config/schema.js';
import { bwrapOptions, SANDBOX_IGNORE_NUMBERS, SANDBOX_IGNORES } from './bwrap.js';
import { checkSandbox, SandboxUnavailable, type SandboxHost } from './host.js';
import { prlimitOptions, rlimits, type Rlimit } from './limits.js';
import { setprivOptions, type RunAs } from './user.js';
import { findProtected } from './protect.js';
import { byName, INSIDE_NET, networkOf, PROXY_PORT } from './network.js';
import { unixSocketFilter } from './seccomp.js';
import { workspacesOf, writableTrees } from './workspaces.js';
import { mountChain, mountSteps, overlaysFor, type MountSteps, type Overlay } from './overlay.js';

/** What a confined job gets between fork and exec (the project's spawner, native/spawn.c, does it). */
export interface SpawnSteps {
  /** Signal numbers set to SIG_IGN. */
  ignore?: number[];
  /** [resource, soft, hard]. */
  limits?: Rlimit[];
  /** Become this user, with exactly these supplementary groups. */
  user?: { uid: number; gid: number; groups: number[] };
  /** The daemon's descriptors the job inherits at the same numbers (see LaunchPlan.inherit). */
  keep?: number[];
  /** The session's cgroup.procs files, joined first of all (src/cgroup/join.ts adds them). */
  cgroups?: string[];
  /** Review mode: a mount namespace of the job's own with its workspaces' overlays (sandbox/overlay.ts). */
  mounts?: MountSteps;
}

/** What decides a session's confinement: the config in force, the scope, and whether it asked for elevated. */
export interface Confinement {
  config: Pick<Config, 'sandbox' | 'limits' | 'scopes'>;
  scope: string;
  elevated: boolean;
}

/** The job as the runner would start it unconfined. */
export interface Job {
  shell: string;
  args: string[];
  cwd: string;
  /** PROCCTL_TMPDIR. */
  scratch: string | undefined;
  /** The daemon's own paths, hidden from a sandboxed job (SPEC §12). */
  hidden: readonly string[];
  /** The job's end of its channel back (daemon/channel.ts), a descriptor it inherits. */
  channel?: number;
  /** Network by name: the descriptor the sandbox's proxy helper asks the daemon's proxy for streams on. */
  proxy?: number;
  /** Review mode (SPEC §16): where the session's changes are kept (`<state>/changes/<id>`); its workspaces become overlays. */
  review?: string;
  /** Where bwrap writes the job's exit status (`--json-status-fd`), read when a crash left no parent to wait for it (docs/durability.md). */
  status?: number;
}

/** How to start a session's job: what to exec, and what to do between fork and exec. */
export interface LaunchPlan {
  file: string;
  /** argv after argv[0]. */
  args: string[];
  /** For the project's spawner (native/spawn.c), between fork and exec; undefined when none. */
  steps: SpawnSteps | undefined;
  /** The same steps as programs run before `file`, for spawners that cannot do them (node-pty, the fork fallback). */
  wrapped(): { file: string; args: string[] };
  /** Under bwrap: it reports a job killed by signal N as exit status 128+N. */
  sandboxed: boolean;
  limits: readonly Rlimit[];
  /** What the answer's first lines say about the confinement (a read-only workdir, a walk cut short). */
  notes: string[];
  /**
   * The daemon's descriptors the job gets at the same numbers (its channel, bwrap's seccomp
   * filter): every spawner passes exactly these, and no other descriptor of the daemon's.
   */
  inherit: readonly number[];
  /** Close what the plan opened (the filter's descriptor), once the job is started or given up. */
  release(): void;
  /** Review mode: the workspaces the job writes through overlays, and where their upper directories are (made by the runner). */
  overlays?: Overlay[];
}

/**
 * The user a non-elevated session runs as (`sandbox.user`), or undefined. Asked before the
 * plan (and handed to it): the runner gives that user a scratch directory it can reach, and its HOME.
 */
export function sessionUser(c: Confinement): RunAs | undefined {
  if (c.elevated || c.config.sandbox.user === undefined) return undefined;
  return hostFor(c).user;
}

/** The host's programs for this config, or SandboxUnavailable with why this host cannot confine as it says. */
function hostFor(c: Confinement): SandboxHost {
  const check = checkSandbox(c.config);
  if (check.refused) throw new SandboxUnavailable(check.refused);
  return check.host;
}

const NO_LIMITS: readonly Rlimit[] = [];

/**
 * The launch plan of a session (SPEC §12): elevated, or with nothing configured, the shell
 * itself; else the shell inside bwrap (when `sandbox.mode` is not off) and under the limits.
 * Throws SandboxUnavailable when the config asks for a sandbox this host cannot make: nothing
 * the config says to confine ever runs unconfined.
 */
export function planLaunch(c: Confinement, job: Job, user = sessionUser(c)): LaunchPlan {
  const plain = { file: job.shell, args: job.args };
  const limits = c.elevated ? NO_LIMITS : rlimits(c.config.limits);
  const mode = c.elevated ? 'off' : c.config.sandbox.mode;
  if (mode === 'off' && limits.length === 0 && !user) {
    return { ...plain, steps: undefined, wrapped: () => plain, sandboxed: false, limits, notes: [], inherit: [], release: nothing };
  }
  const channel = job.channel === undefined ? [] : [job.channel];
  const host = hostFor(c);
  const prlimit = limits.length > 0 ? [host.prlimit!, ...prlimitOptions(limits), '--'] : [];
  const become = user ? [host.setpriv!, ...setprivOptions(user)] : [];
  if (mode === 'off') {
    return {
      ...plain,
      steps: { limits: [...limits], ...(channel.length > 0 ? { keep: channel } : {}), ...(user ? { user: { uid: user.uid, gid: user.gid, groups: user.groups } } : {}) },
      wrapped: () => {
        const chain = [...prlimit, ...become, job.shell, ...job.args];
        return { file: chain[0], args: chain.slice(1) };
      },
      sandboxed: false,
      limits,
      notes: [],
      inherit: channel,
      release: nothing,
    };
  }
  const notes: string[] = [];
  let writable: string[] = [];
  let workspaces: string[] = [];
  if (mode === 'workspace-write') {
    const trees = writableTrees(workspacesOf(c.config, c.scope), c.config.sandbox.writable, job.cwd);
    writable = trees.writable;
    workspaces = trees.workspaces;
    if (trees.note) notes.push(trees.note);
  }
  // Review mode: the workspace of the workdir through an overlay (not the caches of sandbox.writable, /tmp or the
  // scratch directory); one review holds one workspace's changes, so the session's other workspaces are read-only.
  const overlays = job.review === undefined ? undefined : overlaysFor(workspaces, job.cwd, job.review);
  if (overlays) writable = writable.filter((w) => !workspaces.includes(w) || overlays.some((o) => o.target === w));
  const mounts = overlays && overlays.length > 0 ? mountSteps(overlays, host.root) : undefined;
  if (mounts && !mountsPossible(host)) throw new SandboxUnavailable('review mode needs util-linux unshare and mount on the daemon\'s PATH for terminal sessions; install util-linux');
  const protect = findProtected(writable, c.config.sandbox.protect);
  if (protect.truncated) notes.push(`sandbox.protect: ${protect.truncated}`);
  // Network by name: no network of its own (bwrap's namespace has only loopback), a proxy helper first.
  const network = c.elevated ? true : networkOf(c.config, c.scope);
  const proxied = byName(network) !== undefined && job.proxy !== undefined;
  const options = bwrapOptions({
    mode,
    network: network === true,
    workdir: job.cwd,
    scratch: job.scratch,
    hidden: job.hidden,
    writable,
    protect: protect.paths,
    tmpBytes: c.config.sandbox.tmpBytes,
    asRoot: host.root,
    asUser: user !== undefined,
    // The helper runs from procctl's own files, and node from wherever it is.
    seen: proxied ? [packageRoot(), dirname(process.execPath)] : [],
  });
  // No Unix socket can be made inside (native/seccomp.c), unless the operator lifted it.
  const filter = c.config.sandbox.allowUnixSockets ? undefined : unixSocketFilter();
  const inherit = [...channel, ...(proxied ? [job.proxy!] : []), ...(filter === undefined ? [] : [filter]), ...(job.status === undefined ? [] : [job.status])];
  const helper = proxied ? [process.execPath, INSIDE_NET, String(PROXY_PORT), String(job.proxy), '--'] : [];
  // bwrap itself runs as the daemon (root binds what the user could not reach); the job becomes the user inside.
  const args = [...options, ...(filter === undefined ? [] : ['--seccomp', String(filter)]), ...(job.status === undefined ? [] : ['--json-status-fd', String(job.status)]), '--', ...become, host.env!, '--default-signal', ...helper, job.shell, ...job.args];
  const bwrap = host.bwrap!;
  return {
    file: bwrap,
    args,
    steps: { ignore: SANDBOX_IGNORE_NUMBERS, ...(inherit.length > 0 ? { keep: inherit } : {}), ...(limits.length > 0 ? { limits: [...limits] } : {}), ...(mounts ? { mounts } : {}) },
    wrapped: () => {
      const overlay = mounts ? mountChain(mounts, { unshare: host.unshare!, mount: host.mount!, sh: '/bin/sh' }) : [];
      const chain = [...prlimit, ...overlay, host.env!, `--ignore-signal=${SANDBOX_IGNORES.map((s) => s.slice(3)).join(',')}`, bwrap, ...args];
      return { file: chain[0], args: chain.slice(1) };
    },
    sandboxed: true,
    limits,
    notes,
    inherit,
    release: () => {
      if (filter !== undefined) closeSync(filter);
    },
    ...(overlays ? { overlays } : {}),
  };
}

/** Terminals and the fork fallback mount the overlays through programs. */
const mountsPossible = (host: SandboxHost) => host.unshare !== undefined && host.mount !== undefined;

const nothing = () => undefined;
