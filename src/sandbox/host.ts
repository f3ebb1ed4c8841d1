import { spawn, spawnSync, type StdioOptions } from 'node:child_process';
import { closeSync, statSync } from 'node:fs';
import { hostLook } from './host-print.js';
import type { Program } from './programs.js';
import type { Config } from '../config/schema.js';
import { bwrapOptions } from './bwrap.js';
import { rlimits } from './limits.js';
import { namespaceAdvice, namespaceFacts } from './refusal.js';
import { filterProblem, unixSocketFilter } from './seccomp.js';
import { resolveUser, setprivOptions, type RunAs } from './user.js';

type SandboxConfig = Pick<Config, 'sandbox' | 'limits'>;

/** The programs confinement uses, found on the daemon's PATH (sandbox/programs.ts) when the config is loaded, and again when the host changed. */
export interface SandboxHost {
  bwrap?: string;
  /** coreutils env: resets the job's signals inside the sandbox, ignores them for bwrap outside. */
  env?: string;
  /** util-linux prlimit: limits for jobs the project's spawner does not start (terminals, the fork fallback). */
  prlimit?: string;
  /** util-linux setpriv: becomes sandbox.user inside the sandbox, and for terminals and the fork fallback. */
  setpriv?: string;
  /** util-linux unshare and mount: review mode's overlays for jobs the project's spawner does not start. */
  unshare?: string;
  mount?: string;
  /** The daemon runs as root (bwrap drops its capabilities). */
  root: boolean;
  /** `sandbox.user`, resolved. */
  user?: RunAs;
}

/** `daemon.status.sandbox` (SPEC §12). */
export interface SandboxStatus {
  mode: Config['sandbox']['mode'];
  available: boolean;
  reason?: string;
}

export interface SandboxCheck {
  host: SandboxHost;
  status: SandboxStatus;
  /** The config asks for something this host cannot give: the daemon must not run with it. */
  refused?: string;
}

const INSTALL = 'install bubblewrap (Debian: apt-get install -y bubblewrap), or set sandbox.mode to "off" to run sessions unconfined';
const PROBE_TIMEOUT_MS = 10_000;

/** Where PATH found each program a check asks for, in the host's look the check is held with (sandbox/host-print.ts). */
type Programs = Record<Program, string | undefined>;

/** A program the probe runs, and how it ended. */
interface Step {
  file: string;
  args: string[];
  /** Given the seccomp filter as fd 3 (bwrap's `--seccomp 3`). */
  filter?: boolean;
}
interface Ran {
  status: number | null;
  signal: NodeJS.Signals | null;
  stderr: string;
  error?: Error;
  timedOut?: boolean;
}

/**
 * Whether bwrap can build a sandbox like a session's on this host; why not, if not. Written
 * once as the programs to run, driven by `probe` (blocking, before the daemon serves) or by
 * `probeAsync` (while it serves, so the loop never waits on bwrap).
 */
function* probeSteps(host: SandboxHost, c: SandboxConfig): Generator<Step, string | undefined, Ran> {
  if (!host.bwrap) return `bwrap is not on the daemon's PATH (${process.env.PATH ?? 'unset'}); ${INSTALL}`;
  if (!host.env) return 'env (GNU coreutils) is not on the daemon\'s PATH; the sandbox needs it to give jobs their signals back';
  const env = yield { file: host.env, args: ['--ignore-signal=TERM', '--default-signal', 'true'] };
  if (env.status !== 0) return `${host.env} does not know --ignore-signal and --default-signal (GNU coreutils 8.31 or newer has them); the sandbox needs them`;
  const layout = {
    mode: c.sandbox.mode === 'off' ? ('read-only' as const) : c.sandbox.mode,
    network: c.sandbox.network === true,
    workdir: '/',
    scratch: '/tmp',
    hidden: [],
    writable: c.sandbox.writable,
    protect: [],
    tmpBytes: c.sandbox.tmpBytes,
    asRoot: host.root,
    asUser: host.user !== undefined,
  };
  const become = host.user ? [host.setpriv!, ...setprivOptions(host.user)] : [];
  const filter = !c.sandbox.allowUnixSockets;
  const unmade = filter ? filterProblem() : undefined;
  if (unmade) return unmade;
  const seccomp = filter ? ['--seccomp', '3'] : [];
  const run = yield { file: host.bwrap, args: [...bwrapOptions(layout), ...seccomp, '--', ...become, host.env, '--default-signal', 'true'], filter };
  if (run.status === 0) return undefined;
  const said = (run.stderr || (run.timedOut ? `it did not finish within ${PROBE_TIMEOUT_MS / 1000} s and was killed` : '') || run.error?.message || `exit ${run.status ?? run.signal}`).trim().split('\n')[0];
  const advice = namespaceAdvice(said, namespaceFacts());
  const userns = advice
    ? `; ${advice}`
    : /namespace|permission|operation not permitted/i.test(said)
      ? '; user namespaces look refused to the daemon\'s user: allow them (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0, or an AppArmor profile for bwrap) or run the daemon as root'
      : '';
  return `bwrap cannot create the sandbox on this host: ${said}${userns}`;
}

function probe(host: SandboxHost, c: SandboxConfig): string | undefined {
  const steps = probeSteps(host, c);
  let next = steps.next();
  while (!next.done) {
    const fd = next.value.filter ? unixSocketFilter() : undefined;
    const stdio: StdioOptions = ['ignore', 'ignore', 'pipe', ...(fd === undefined ? [] : [fd])];
    const r = spawnSync(next.value.file, next.value.args, { encoding: 'utf8', stdio, timeout: PROBE_TIMEOUT_MS, killSignal: 'SIGKILL' });
    if (fd !== undefined) closeSync(fd);
    const timedOut = (r.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT';
    next = steps.next({ status: r.status, signal: r.signal, stderr: r.stderr ?? '', error: r.error, timedOut });
  }
  return next.value;
}

async function probeAsync(host: SandboxHost, c: SandboxConfig): Promise<string | undefined> {
  const steps = probeSteps(host, c);
  let next = steps.next();
  while (!next.done) next = steps.next(await run(next.value));
  return next.value;
}

/** One probe program, without blocking the loop; stderr kept to its first 4 KiB. */
function run({ file, args, filter }: Step): Promise<Ran> {
  return new Promise((resolve) => {
    const started = Date.now();
    const fd = filter ? unixSocketFilter() : undefined;
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe', ...(fd === undefined ? [] : [fd])], timeout: PROBE_TIMEOUT_MS, killSignal: 'SIGKILL' });
    if (fd !== undefined) closeSync(fd);
    let stderr = '';
    let error: Error | undefined;
    child.stderr!.setEncoding('utf8').on('data', (text: string) => {
      if (stderr.length < 4096) stderr += text;
    });
    child.on('error', (err) => (error = err));
    child.on('close', (status, signal) => resolve({ status, signal, stderr, error, timedOut: signal === 'SIGKILL' && Date.now() - started >= PROBE_TIMEOUT_MS }));
  });
}

/** Problems with the config itself, found before anything runs. */
function configProblem(c: SandboxConfig): string | undefined {
  if (c.sandbox.mode === 'workspace-write') {
    for (const path of c.sandbox.writable) {
      try {
        statSync(path);
      } catch {
        return `sandbox.writable path ${path} does not exist; create it or take it out of sandbox.writable`;
      }
    }
  }
  return undefined;
}

/** What a sandbox check depends on: the config's sandbox and limits, and the PATH its programs are found on. */
export function sandboxCheckKey(c: SandboxConfig, path = process.env.PATH): string {
  return JSON.stringify([c.sandbox, c.limits, path]);
}

/** Keys whose bwrap probe another image of this daemon ran and passed moments ago (a planned restart's, SPEC §19). */
const probedElsewhere = new Set<string>();

/**
 * A planned restart's old image checked this very config's sandbox on this host just before the
 * exec (the pre-flight, or its own check): the new image does not run bwrap again for it. Only
 * the probe is skipped, and only in the first check of that key (a host changed since is probed);
 * what the config itself asks (paths, the user, prlimit) is checked as ever.
 */
export function trustProbe(key: string): void {
  probedElsewhere.add(key);
}

/**
 * The check of a config on this host: it yields the host's programs when bwrap must be tried,
 * and is given what the probe found. Driven by `check` (blocking: a start, a reload, a restart's
 * pre-flight) or by `checkOffLoop` (an exec and daemon.status, which never wait on bwrap in the loop).
 */
function* checking(c: SandboxConfig, path: string | undefined, found: Programs): Generator<SandboxHost, SandboxCheck, string | undefined> {
  const { bwrap, env, prlimit, setpriv, unshare, mount } = found;
  const host: SandboxHost = { bwrap, env, prlimit, setpriv, unshare, mount, root: process.getuid?.() === 0 };
  const mode = c.sandbox.mode;
  const who = userProblem(c, host, found);
  let why: string | undefined;
  if (mode === 'off') why = limitsProblem(c, host) ?? who;
  else {
    why = configProblem(c) ?? who;
    if (why === undefined && !probedElsewhere.delete(sandboxCheckKey(c, path))) why = yield host;
    why ??= limitsProblem(c, host);
  }
  return { host, status: { mode, available: why === undefined, ...(why ? { reason: why } : {}) }, refused: why };
}

function check(c: SandboxConfig, path: string | undefined, found: Programs): SandboxCheck {
  const steps = checking(c, path, found);
  let next = steps.next();
  while (!next.done) next = steps.next(probe(next.value, c));
  return next.value;
}

async function checkOffLoop(c: SandboxConfig, path: string | undefined, found: Programs): Promise<SandboxCheck> {
  const steps = checking(c, path, found);
  let next = steps.next();
  while (!next.done) next = steps.next(await probeAsync(next.value, c));
  return next.value;
}

/** sandbox.user: only a root daemon can run sessions as someone else; resolves host.user. */
function userProblem(c: SandboxConfig, host: SandboxHost, found: Programs): string | undefined {
  const spec = c.sandbox.user;
  if (spec === undefined) return undefined;
  if (!host.root) return `sandbox.user is set but the daemon runs as uid ${process.getuid?.()}, not root: only root can run sessions as another user; run the daemon as root or take sandbox.user out`;
  if (!host.setpriv) return 'sandbox.user is set but setpriv (util-linux) is not on the daemon\'s PATH: terminal sessions, the fork fallback and the sandbox become the user through it; install util-linux';
  const user = resolveUser(spec, found.getent, found.id);
  if (typeof user === 'string') return user;
  host.user = user;
  return undefined;
}

function limitsProblem(c: SandboxConfig, host: SandboxHost): string | undefined {
  if (rlimits(c.limits).length === 0 || host.prlimit) return undefined;
  return 'limits are set but prlimit (util-linux) is not on the daemon\'s PATH: terminal sessions and the fork fallback set limits through it; install util-linux';
}

/** A check, the host it was made on (sandbox/host-print.ts), when it was made, and the order it was begun in. */
type Held = SandboxCheck & { print: string; at: number; begun: number };

/** Checks by config key: made again when the host's print changes (a check refused is also tried again after REFUSED_RETRY_MS). */
const checks = new Map<string, Held>();

/**
 * How long a check that refused is trusted when the host's print has not changed: what the
 * print cannot see (an AppArmor profile loaded for bwrap, a seccomp policy) is tried again this
 * often, while someone asks. A check that passed is trusted until the print changes.
 */
const REFUSED_RETRY_MS = 10_000;

/** The key of a config object (its sandbox and limits written out once, not at every ask). */
const keys = new WeakMap<SandboxConfig, { path: string | undefined; key: string }>();

function keyOf(c: SandboxConfig, path: string | undefined): string {
  let held = keys.get(c);
  if (held === undefined || held.path !== path) {
    held = { path, key: sandboxCheckKey(c, path) };
    keys.set(c, held);
  }
  return held.key;
}

/** Whether a check held still says what this host offers. */
function current(held: Held | undefined, print: string, now: number): held is Held {
  return held !== undefined && held.print === print && (held.refused === undefined || now - held.at < REFUSED_RETRY_MS);
}

/** Checks being made off the loop, by print and key: asks meanwhile wait for the same one. */
const making = new Map<string, Promise<Held>>();
let checksBegun = 0;

/**
 * The check of this config on this host as it is now: made once per distinct config (and PATH),
 * and made again once the host changed (a program installed, upgraded or removed, a
 * user-namespace sysctl), so an exec uses the bwrap there is and daemon.status says the same.
 * Made again off the loop (bwrap is not waited for in it; asks meanwhile wait for the same one),
 * or, `blocking`, at once in this thread: where nothing is served yet or the answer cannot wait
 * (a start, a reload, a restart's pre-flight, a launch whose caller did not wait for `heldCheck`).
 * `fresh`: with the host as it is now, not as a look held past its time saw it (a start, a reload,
 * a restart's checks, which decide on it; a request is answered with the held look, host-print.ts).
 */
function checkOf(c: SandboxConfig, path: string | undefined, blocking: true, fresh?: boolean): Held;
function checkOf(c: SandboxConfig, path: string | undefined, blocking: boolean): Held | Promise<Held>;
function checkOf(c: SandboxConfig, path: string | undefined, blocking: boolean, fresh = false): Held | Promise<Held> {
  const key = keyOf(c, path);
  const now = Date.now();
  const { print, programs } = hostLook(path, now, fresh);
  const found = checks.get(key);
  if (current(found, print, now)) return found;
  const begun = ++checksBegun;
  const keep = (made: SandboxCheck): Held => {
    // Trusted from when it was made (a probe that took its whole timeout is not tried again at once).
    const h: Held = { ...made, print, at: Date.now(), begun };
    // Only a few configs in a daemon's life (one per reload at most): no need to evict. A check
    // that finished late does not replace one begun after it.
    if ((checks.get(key)?.begun ?? 0) <= begun) checks.set(key, h);
    return h;
  };
  if (blocking) return keep(check(c, path, programs));
  const id = `${print}\0${key}`;
  let pending = making.get(id);
  if (pending === undefined) {
    pending = checkOffLoop(c, path, programs)
      .then(keep)
      .finally(() => making.delete(id));
    making.set(id, pending);
  }
  return pending;
}

/**
 * The check an exec's launch will use, made ready off the loop: the held one at once while the
 * host is as it was, else a promise of the one made again. An exec waits for it before its launch
 * (sandbox/plan.ts), which then finds it held: the spawn path never runs bwrap's probe.
 */
export function heldCheck(c: SandboxConfig, path = process.env.PATH): SandboxCheck | Promise<SandboxCheck> {
  return checkOf(c, path, false);
}

/** The held check, made at once (blocking) if the host changed since: for a launch, which cannot wait (see heldCheck). */
export function checkSandbox(c: SandboxConfig, path = process.env.PATH): SandboxCheck {
  return checkOf(c, path, true);
}

/** The daemon refuses to start (or a reload is rejected) when its confinement cannot work here. */
export class SandboxUnavailable extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = 'SandboxUnavailable';
  }
}

/** Throws when the config asks for confinement this host cannot give (as the host is now); never run unconfined instead. */
export function requireSandbox(c: SandboxConfig, path = process.env.PATH): SandboxCheck {
  const found = checkOf(c, path, true, true);
  if (found.refused) {
    const what = c.sandbox.mode === 'off' ? 'the configured limits or sandbox.user cannot be applied' : `sandbox.mode "${c.sandbox.mode}" cannot work`;
    throw new SandboxUnavailable(`${what}: ${found.refused}`);
  }
  return found;
}

/** With the sandbox off: whether it could be on, by config key, for the check (its host) it was tried with. */
const coulds = new Map<string, Could>();
interface Could {
  of: Held;
  at: number;
  status?: SandboxStatus;
  pending: Promise<SandboxStatus>;
}

/**
 * What `daemon.status` says: the check's status, the same object while the host and the config
 * are (a caller may keep what it makes of it by identity). With the sandbox off, whether it could
 * be turned on: bwrap is tried off the loop, the first time anyone asks, and again when the host
 * changed. Cheap when nothing did: a look at the clock, and at the host every HOST_RECHECK_MS.
 */
export function sandboxStatus(c: SandboxConfig, path = process.env.PATH): SandboxStatus | Promise<SandboxStatus> {
  const found = checkOf(c, path, false);
  return found instanceof Promise ? found.then((f) => couldStatus(c, f, path)) : couldStatus(c, found, path);
}

function couldStatus(c: SandboxConfig, found: Held, path: string | undefined): SandboxStatus | Promise<SandboxStatus> {
  if (c.sandbox.mode !== 'off' || found.refused) return found.status;
  const key = keyOf(c, path);
  const now = Date.now();
  const could = coulds.get(key);
  // Tried on the host the check saw; one that refused is tried again after REFUSED_RETRY_MS, as a check that refused is.
  if (could?.of === found && (could.status?.available !== false || now - could.at < REFUSED_RETRY_MS)) return could.status ?? could.pending;
  const entry: Could = {
    of: found,
    at: now,
    pending: probeAsync(found.host, { ...c, sandbox: { ...c.sandbox, mode: 'read-only', writable: [] } }).then((reason) => {
      entry.status = { mode: 'off', available: reason === undefined, ...(reason ? { reason } : {}) };
      return entry.status;
    }),
  };
  coulds.set(key, entry);
  return entry.pending;
}
