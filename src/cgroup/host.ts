import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { accessSync, constants, existsSync, readFileSync } from 'node:fs';
import { basename, join, resolve } from 'node:path';
import { makeDir, readFile, readPids, removeDir, removeTree, writeFile } from './files.js';

/** Which of SPEC §15's three ways sessions run here: a v2 cgroup each, v1 controllers only, or none. */
export type CgroupMode = 'v2' | 'v1' | 'none';
/** The controllers a per-session limit needs. */
export type Controller = 'memory' | 'pids' | 'cpu';
/** The v1 hierarchies procctl uses: the three limits, CPU accounting, and the freezer for pause. */
export type V1Name = Controller | 'cpuacct' | 'freezer';
const V1_NAMES: readonly V1Name[] = ['memory', 'pids', 'cpu', 'cpuacct', 'freezer'];
const CONTROLLERS: readonly Controller[] = ['memory', 'pids', 'cpu'];

/** `cgroups` in the config: which way to run (auto picks the best the host gives), and a v2 subtree to use. */
export interface CgroupConfig {
  mode: 'auto' | 'v2' | 'v1' | 'off';
  root?: string;
}

/** What the daemon found and made at start: where session cgroups go and what each can do. */
export interface CgroupLayout {
  mode: CgroupMode;
  /** Why this mode, in words (daemon.status.cgroups.reason). */
  reason: string;
  /** v2: the directory session cgroups are made in (the daemon's subtree). */
  v2?: string;
  /** v2 has `cgroup.kill` (Linux 5.14); without it a kill walks cgroup.procs. */
  v2Kill: boolean;
  /** v2 counts each cgroup's CPU time in cpu.stat without the cpu controller (Linux 5.8). */
  v2CpuStat: boolean;
  /** v1 hierarchies in use: where session cgroups are made in each. */
  v1: Partial<Record<V1Name, string>>;
  /** Where each limit and its accounting comes from; null: this host cannot give it. */
  controllers: Record<Controller, 'v2' | 'v1' | null>;
  /** How a session is paused: v2's cgroup.freeze, the v1 freezer, or not at all. */
  freeze: 'v2' | 'v1' | null;
  /** The subtrees named after this daemon (made now or by a run before), removed (when empty) at a clean exit. */
  made: string[];
  /** Under a delegated v2 subtree, the leaf the daemon moved itself into (cgroup v2's no-internal-processes rule). */
  leaf?: string;
  /**
   * The hierarchy that says who is in a session ('' for v2, else a v1 controller's name) and the
   * cgroup path of the subtree in it, as /proc/PID/cgroup shows it: a process whose path is
   * below it belongs to a session.
   */
  members?: { hierarchy: string; path: string };
}

/** Where the host's cgroup files are; other roots are for tests that describe a host on disk. */
export interface CgroupHostFiles {
  /** /proc/self/mountinfo's text. */
  mountinfo: string;
  /** /proc/self/cgroup's text. */
  cgroup: string;
  /** systemd manages this host's cgroup tree (/run/systemd/system exists, as sd_booted asks). */
  systemd: boolean;
  /** Whether systemd delegated the unit owning this cgroup path (Delegate=yes), asked only under systemd. */
  delegated(path: string): boolean;
  /** Writes to /proc/self's cgroup membership (moving the daemon into its leaf). */
  pid: number;
}

/** The daemon's own view of the host. */
export function hostFiles(): CgroupHostFiles {
  return {
    mountinfo: readFile('/proc/self/mountinfo') ?? '',
    cgroup: readFile('/proc/self/cgroup') ?? '',
    systemd: existsSync('/run/systemd/system'),
    delegated: systemdDelegated,
    pid: process.pid,
  };
}

/** Ask systemd whether the unit that owns this cgroup has Delegate=yes. */
function systemdDelegated(path: string): boolean {
  const unit = basename(path);
  if (!/\.(service|scope)$/.test(unit)) return false;
  const user = path.includes('/user@') ? ['--user'] : [];
  const r = spawnSync('systemctl', [...user, 'show', '--property=Delegate', '--value', unit], { encoding: 'utf8', timeout: 5000 });
  return r.status === 0 && r.stdout.trim() === 'yes';
}

interface Mount {
  root: string;
  point: string;
  v2: boolean;
  names: string[];
}

/** cgroup mounts from mountinfo: `id parent dev root point opts [optional...] - type source superopts`. */
function cgroupMounts(mountinfo: string): Mount[] {
  const out: Mount[] = [];
  for (const line of mountinfo.split('\n')) {
    const dash = line.indexOf(' - ');
    if (dash < 0) continue;
    const left = line.slice(0, dash).split(' ');
    const [type, , superopts = ''] = line.slice(dash + 3).split(' ');
    if (type !== 'cgroup2' && type !== 'cgroup') continue;
    const unescape = (s: string) => s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
    out.push({ root: unescape(left[3]), point: unescape(left[4]), v2: type === 'cgroup2', names: superopts.split(',') });
  }
  return out;
}

/** The daemon's own cgroup path in each hierarchy: '' for v2, else each controller's name. */
function ownPaths(cgroup: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of cgroup.split('\n')) {
    const [id, names, ...rest] = line.split(':');
    if (rest.length === 0) continue;
    const path = rest.join(':');
    if (id === '0' && names === '') out.set('', path);
    else for (const n of names.split(',')) out.set(n, path);
  }
  return out;
}

/** The directory of cgroup `path` under a mount, when the mount shows it. */
function dirIn(m: Mount, path: string): string | undefined {
  if (m.root === '/') return join(m.point, path);
  if (path === m.root || path.startsWith(`${m.root}/`)) return join(m.point, path.slice(m.root.length));
  return undefined;
}

/** The cgroup path (as /proc/PID/cgroup shows it) of a directory on one of these mounts. */
function cgroupPathOf(mounts: Mount[], dir: string): string {
  const m = mounts.find((x) => dir === x.point || dir.startsWith(`${x.point}/`));
  if (!m) return dir;
  const rest = dir.slice(m.point.length);
  return m.root === '/' ? rest || '/' : `${m.root}${rest}`;
}

/**
 * The subtree name of this daemon under a cgroup it does not own alone: one per state directory,
 * which one daemon holds at a time (SPEC §10), so daemons never meet, and the next start of the
 * same daemon finds what a crashed run left, as its records do.
 */
export function subtreeName(stateDir: string): string {
  return `procctld-${createHash('sha256').update(resolve(stateDir)).digest('hex').slice(0, 12)}`;
}

const writable = (dir: string): boolean => {
  try {
    accessSync(dir, constants.W_OK);
    accessSync(join(dir, 'cgroup.procs'), constants.W_OK);
    return true;
  } catch {
    return false;
  }
};

/** A configured value the host cannot give: the daemon refuses to start (or a reload is rejected). */
export class CgroupsUnavailable extends Error {}

/**
 * Find and make where sessions' cgroups go (SPEC §15), once at start. In order: `cgroups.root`
 * (a v2 directory the operator gives the daemon), the daemon's own v2 cgroup when it is ours to
 * divide (systemd delegated it, or nothing manages the tree), then v1 hierarchies for what v2
 * cannot give here (limits and accounting) or for everything where there is no v2. Under a
 * delegated subtree the daemon moves itself into a leaf, so the subtree can enable controllers
 * for its children. Throws CgroupsUnavailable when the config asks for what is not there.
 */
export function openCgroups(config: CgroupConfig, stateDir: string, host: CgroupHostFiles = hostFiles()): CgroupLayout {
  const none = (reason: string): CgroupLayout => ({ mode: 'none', reason, v2Kill: false, v2CpuStat: false, v1: {}, controllers: { memory: null, pids: null, cpu: null }, freeze: null, made: [] });
  if (config.mode === 'off') return none('cgroups.mode is "off": sessions are tracked by process group and /proc');
  const mounts = cgroupMounts(host.mountinfo);
  const own = ownPaths(host.cgroup);
  const name = subtreeName(stateDir);
  const made: string[] = [];
  const notes: string[] = [];
  const layout: CgroupLayout = { ...none(''), made };

  // v2: exact membership, one-write kill, freeze.
  if (config.mode !== 'v1') {
    const found = v2Subtree(config, mounts, own.get(''), host, name);
    if ('problem' in found) {
      if (config.mode === 'v2' || config.root !== undefined) throw new CgroupsUnavailable(found.problem);
      notes.push(found.problem);
    } else {
      try {
        if (found.make) {
          makeDir(found.dir);
          made.push(found.dir);
        }
        if (found.own) layout.leaf = moveIntoLeaf(found.dir, host.pid);
        layout.v2 = found.dir;
        layout.v2Kill = existsSync(join(found.dir, 'cgroup.kill'));
        layout.v2CpuStat = existsSync(join(found.dir, 'cpu.stat'));
        layout.mode = 'v2';
        layout.freeze = existsSync(join(found.dir, 'cgroup.freeze')) ? 'v2' : null;
        for (const c of enableControllers(found.dir)) layout.controllers[c] = 'v2';
        layout.members = { hierarchy: '', path: cgroupPathOf(mounts, found.dir) };
        notes.unshift(`v2 at ${found.dir} (${found.why})`);
      } catch (err) {
        if (config.mode === 'v2' || config.root !== undefined) throw new CgroupsUnavailable(`cannot set up ${found.dir}: ${(err as Error).message}`);
        notes.push(`v2 at ${found.dir} cannot be used: ${(err as Error).message}`);
      }
    }
  }

  // v1: the controllers v2 does not give here, or (no v2) everything.
  if (config.mode !== 'v2') {
    const wanted = layout.mode === 'v2' ? CONTROLLERS.filter((c) => layout.controllers[c] === null) : V1_NAMES;
    const managed = host.systemd ? (own.get('memory') ?? own.get('pids')) : undefined;
    if (managed !== undefined && !host.delegated(managed)) {
      if (wanted.length) notes.push(`v1 hierarchies are systemd's and ${managed} is not delegated (Delegate=yes)`);
    } else {
      for (const n of wanted) {
        const m = mounts.find((x) => !x.v2 && x.names.includes(n));
        const path = own.get(n);
        const dir = m && path !== undefined ? dirIn(m, path) : undefined;
        if (!dir) continue;
        const mine = join(dir, name);
        try {
          makeDir(mine);
          if (!made.includes(mine)) made.push(mine);
          layout.v1[n] = mine;
        } catch (err) {
          notes.push(`v1 ${n} at ${dir} is not writable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
        }
      }
      for (const c of CONTROLLERS) if (layout.controllers[c] === null && layout.v1[c]) layout.controllers[c] = 'v1';
      const member = membershipDir(layout);
      if (layout.mode === 'none' && member) {
        layout.mode = 'v1';
        const n = V1_NAMES.find((x) => layout.v1[x] === member)!;
        layout.members = { hierarchy: n, path: cgroupPathOf(mounts.filter((m) => !m.v2 && m.names.includes(n)), member) };
      }
      if (layout.freeze === null && layout.v1.freezer) layout.freeze = 'v1';
      const used = Object.keys(layout.v1);
      if (used.length) notes.push(`v1 ${used.join(', ')} under ${name}`);
    }
  }
  if (layout.mode === 'none' && config.mode === 'v1') throw new CgroupsUnavailable(`cgroups.mode is "v1" but no v1 hierarchy can be written here: ${notes.join('; ')}`);
  const missing = CONTROLLERS.filter((c) => layout.controllers[c] === null);
  if (layout.mode !== 'none' && missing.length) notes.push(`no ${missing.join(', ')} controller: limits.session needing it are refused`);
  layout.reason = layout.mode === 'none' ? `no cgroup can be written: ${notes.join('; ') || 'no cgroup filesystem is mounted'}` : notes.join('; ');
  return layout;
}

type Found = { dir: string; make: boolean; own: boolean; why: string } | { problem: string };

/** The v2 directory to divide: the configured root, or the daemon's own cgroup when it is the daemon's to divide. */
function v2Subtree(config: CgroupConfig, mounts: Mount[], ownPath: string | undefined, host: CgroupHostFiles, name: string): Found {
  const v2 = mounts.filter((m) => m.v2);
  const ownDir = ownPath === undefined ? undefined : v2.map((m) => dirIn(m, ownPath)).find((d) => d !== undefined);
  if (config.root !== undefined) {
    const root = config.root.replace(/\/+$/, '');
    if (!v2.some((m) => root === m.point || root.startsWith(`${m.point}/`))) return { problem: `cgroups.root ${root} is not on a cgroup2 filesystem (mounted here: ${v2.map((m) => m.point).join(', ') || 'none'})` };
    if (!existsSync(join(root, 'cgroup.procs'))) return { problem: `cgroups.root ${root} is not a cgroup directory (create it, or delegate it: docs/resources.md)` };
    if (!writable(root)) return { problem: `cgroups.root ${root} is not writable by the daemon's user (chown it to that user, or delegate it: docs/resources.md)` };
    return { dir: root, make: false, own: root === ownDir, why: 'cgroups.root' };
  }
  if (ownDir === undefined) return { problem: 'no cgroup2 filesystem shows the daemon\'s cgroup' };
  if (host.systemd) {
    if (!host.delegated(ownPath!)) return { problem: `systemd manages ${ownPath} and did not delegate it: add Delegate=yes to the unit (docs/resources.md)` };
    if (!writable(ownDir)) return { problem: `${ownDir} is delegated but not writable by the daemon's user` };
    return { dir: ownDir, make: false, own: true, why: 'delegated by systemd' };
  }
  if (!writable(ownDir)) return { problem: `${ownDir}, the daemon's cgroup, is not writable by its user` };
  return { dir: join(ownDir, name), make: true, own: false, why: "under the daemon's own cgroup; nothing else manages this tree" };
}

/** Move the daemon (every process in the subtree's top, which is ours) into `dir/daemon`. */
function moveIntoLeaf(dir: string, pid: number): string {
  const leaf = join(dir, 'daemon');
  makeDir(leaf);
  writeFile(join(leaf, 'cgroup.procs'), String(pid));
  // What else sat at the top came with the daemon (its guardian, before a restart): move it along.
  for (const other of readPids(dir)) {
    try {
      writeFile(join(leaf, 'cgroup.procs'), String(other));
    } catch {
      // gone meanwhile
    }
  }
  return leaf;
}

/** Enable the limit controllers the subtree is offered for its children; returns those enabled. */
function enableControllers(dir: string): Controller[] {
  const offered = (readFile(join(dir, 'cgroup.controllers')) ?? '').trim().split(/\s+/);
  const on: Controller[] = [];
  for (const c of CONTROLLERS) {
    if (!offered.includes(c)) continue;
    try {
      writeFile(join(dir, 'cgroup.subtree_control'), `+${c}`);
      on.push(c);
    } catch {
      // processes at the top (a root given by the operator that is not ours alone): no controller
    }
  }
  return on;
}

/** The v1 hierarchy whose cgroup.procs says who is in a session, where there is no v2. */
export function membershipDir(layout: Pick<CgroupLayout, 'v1'>): string | undefined {
  const v = layout.v1;
  return v.pids ?? v.freezer ?? v.memory ?? v.cpu ?? v.cpuacct;
}

/**
 * At start, once the daemon holds its state directory: the subtrees named after it that a run
 * before made where this run makes none (cgroups.mode or cgroups.root changed since; a crash,
 * or a stop of a build that did not remove them, left them) are removed when empty, children
 * first (the empty session cgroups in them). Those this run uses are its own again. Returns the
 * ones removed.
 */
export function removeUnusedSubtrees(layout: CgroupLayout, stateDir: string, host: Pick<CgroupHostFiles, 'mountinfo' | 'cgroup'> = hostFiles()): string[] {
  const name = subtreeName(stateDir);
  const own = ownPaths(host.cgroup);
  const used = new Set([...layout.made, ...(layout.v2 ? [layout.v2] : []), ...Object.values(layout.v1)]);
  const removed: string[] = [];
  for (const m of cgroupMounts(host.mountinfo)) {
    const path = m.v2 ? own.get('') : m.names.map((n) => own.get(n)).find((p) => p !== undefined);
    const dir = path === undefined ? undefined : dirIn(m, path);
    if (dir === undefined) continue;
    const stale = join(dir, name);
    if (!used.has(stale) && existsSync(stale) && removeTree(stale)) removed.push(stale);
  }
  return removed;
}

/** At a clean exit: leave the leaf and remove what the daemon made, when empty. */
export function closeCgroups(layout: CgroupLayout): void {
  for (const dir of [...layout.made].reverse()) removeDir(dir);
}

/** `daemon.status.cgroups` (SPEC §15). */
export function cgroupStatus<R>(layout: CgroupLayout, running?: R) {
  // Every key always there (undefined ones are left out of the JSON): an object of one shape,
  // made with no spread. Made with conditional spreads, then spread into daemon.status's answer
  // with `running` added, it left V8 keeping a third of a megabyte of the young generation alive
  // at every scavenge, all promoted at the next one, where a status is asked after every poll:
  // an object spread with a property added, from an object whose own shape came from spreads
  // (docs/benchmarks.md, tails at 1,000 sessions: "two object spreads in `daemon.status`").
  return {
    mode: layout.mode,
    reason: layout.reason,
    root: layout.v2 || undefined,
    v1: Object.keys(layout.v1).length ? layout.v1 : undefined,
    controllers: layout.controllers,
    freeze: layout.freeze,
    kill: layout.v2 ? (layout.v2Kill ? 'cgroup.kill' : 'signal each process') : layout.mode === 'v1' ? 'signal each process' : null,
    running,
  };
}

/** The kernel's own check for /proc/PID/cgroup of another process: its v2 path, and its v1 paths by controller. */
export function cgroupPathsOf(pid: number): Map<string, string> | undefined {
  try {
    return ownPaths(readFileSync(`/proc/${pid}/cgroup`, 'latin1'));
  } catch {
    return undefined;
  }
}
