import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { release } from 'node:os';
import { join } from 'node:path';
import { under } from './bwrap.js';
import { which } from './programs.js';
import { openWork } from '../base/overlay-work.js';

/**
 * Review mode (SPEC §16): each writable workspace of a session is an overlay whose upper
 * directory the daemon keeps. The job's own mount namespace gets the overlays before bwrap
 * starts (the project's spawner mounts them between fork and exec, native/spawn.c), so bwrap
 * binds the workspace as that namespace shows it and needs no `--overlay` of its own (bubblewrap
 * 0.8 has none). Nothing here touches the host's mounts: the namespace is private and goes with
 * the job.
 */

/** One workspace seen through an overlay: writes go to `upper`, `work` is the kernel's scratch beside it. */
export interface Overlay {
  /** The workspace (resolved), mounted over at the same path. */
  target: string;
  upper: string;
  work: string;
}

/** What the spawner does between fork and exec (SpawnSteps.mounts). */
export interface MountSteps {
  /** The daemon is not root: a user namespace of its own first, its ids mapped to themselves. */
  userns: boolean;
  overlays: { target: string; options: string }[];
  /**
   * The same namespaces made ahead with these overlays mounted (runner/premount.ts), as
   * descriptors the spawner joins instead (user -1 when the daemon is root).
   */
  enter?: { user: number; mnt: number };
}

/**
 * The overlay of a session whose changes are kept under `dir` (`<state>/changes/<id>`): the
 * workspace that holds the workdir (the innermost, when one holds another), or none when the
 * workdir is in no workspace (it runs read-only there).
 */
export function overlaysFor(workspaces: readonly string[], workdir: string, dir: string): Overlay[] {
  const at = realOr(workdir);
  const target = workspaces.filter((w) => under(at, w)).sort((a, b) => b.length - a.length)[0];
  return target === undefined ? [] : [{ target, upper: join(dir, 'upper'), work: join(dir, 'work') }];
}

function realOr(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/** `volatile` came with Linux 5.10; an older kernel refuses the mount with it. */
const VOLATILE = ((release: string) => {
  const [major, minor] = release.split('.').map(Number);
  return major > 5 || (major === 5 && minor >= 10);
})(release());

/** overlayfs splits its options on `,` and lower layers on `:`, and takes `\` as the escape. */
const escape = (path: string) => path.replace(/[\\,:]/g, '\\$&');

/**
 * The mount options of one overlay. Redirects, metacopy and the index stay off, so the upper
 * directory holds whole files, whiteouts and opaque markers only (what changes/ reads); in a user
 * namespace the markers are user.overlay.* xattrs (`userxattr`), trusted.overlay.* otherwise.
 * `volatile`: the unmount at the session's end does not sync the upper directory's whole file
 * system (every dirty file of the state directory's disk, not only the job's: it stalled other
 * work on a busy host). A job's writes then reach the disk as a direct job's do, when the kernel
 * writes them back; the upper directory is read as plain files and never mounted again (the
 * kernel refuses to remount a volatile one), so nothing else changes.
 */
export function mountOptions(o: Overlay, userns: boolean): string {
  const base = `lowerdir=${escape(o.target)},upperdir=${escape(o.upper)},workdir=${escape(o.work)},redirect_dir=nofollow,metacopy=off${VOLATILE ? ',volatile' : ''}`;
  return userns ? `${base},userxattr` : `${base},index=off`;
}

export function mountSteps(overlays: readonly Overlay[], root: boolean): MountSteps {
  return { userns: !root, overlays: overlays.map((o) => ({ target: o.target, options: mountOptions(o, !root) })) };
}

/**
 * The same as programs run before the rest of the chain, for spawners that cannot do it between
 * fork and exec (terminals, the fork fallback): util-linux unshare, then a shell that mounts each
 * overlay and execs what follows `--`. mount(8) insists on uid 0, so a daemon that is not root
 * mounts as root of a user namespace of its own and then takes back its own ids in a second one
 * (the job must not run as root of anything, and bwrap must find the ids it expects).
 */
export function mountChain(steps: MountSteps, programs: { unshare: string; mount: string; sh: string }): string[] {
  const script = `while [ "$1" != -- ]; do ${programs.mount} -t overlay overlay -o "$1" "$2" || exit 126; shift 2; done; shift; exec "$@"`;
  const uid = process.getuid?.() ?? 0;
  const gid = process.getgid?.() ?? 0;
  const back = steps.userns ? [programs.unshare, '--user', `--map-user=${uid}`, `--map-group=${gid}`, '--'] : [];
  return [
    programs.unshare, '--mount', '--propagation', 'private', ...(steps.userns ? ['--user', '--map-root-user'] : []), '--',
    programs.sh, '-c', script, 'procctl-overlay', ...steps.overlays.flatMap((o) => [o.options, o.target]), '--',
    ...back,
  ];
}

/** `daemon.status.changes` (SPEC §16): whether review mode can run here, how, and else why not. */
export interface ReviewSupport {
  review: boolean;
  how?: 'overlayfs' | 'overlayfs in a user namespace';
  reason?: string;
  /** The probe could not make its directory in `scratch` (the state directory refuses writes): nothing was tried. */
  stateRefused?: Error;
}

/**
 * Can this host mount an overlay for a session? Tried once for real, as the spawner will do it:
 * an overlay over a scratch directory in a private mount namespace (a user namespace of its
 * own when the daemon is not root), with util-linux unshare, in `scratch` (then removed).
 */
export async function probeReview(scratch: string): Promise<ReviewSupport> {
  const root = process.getuid?.() === 0;
  const how = root ? 'overlayfs' : 'overlayfs in a user namespace';
  const unshare = which('unshare', process.env.PATH);
  const mount = which('mount', process.env.PATH);
  if (!unshare || !mount) return { review: false, reason: 'util-linux unshare and mount are not on the daemon\'s PATH; install util-linux' };
  let dir: string | undefined;
  let o: Overlay;
  try {
    dir = mkdtempSync(join(scratch, 'review-probe-'));
    o = { target: join(dir, 'lower'), upper: join(dir, 'upper'), work: join(dir, 'work') };
    for (const d of [o.target, o.upper, o.work]) mkdirSync(d);
  } catch (err) {
    if (dir) removeProbe(dir);
    const e = err as Error;
    return { review: false, reason: `cannot try an overlay: the state directory ${scratch}, where held changes go, refuses writes (${e.message}); make it writable`, stateRefused: e };
  }
  try {
    const chain = mountChain(mountSteps([o], root), { unshare, mount, sh: '/bin/sh' });
    // Waited for off the daemon's thread: a synchronous spawn of the chain held every request
    // behind it, 176 ms on a quiet machine with 1,000 sessions and 1.4 s on a loaded one (the
    // first daemon.status; docs/benchmarks.md, tails at 1,000 sessions).
    const r = await run(chain[0], [...chain.slice(1), '/bin/sh', '-c', `echo x > ${JSON.stringify(join(o.target, 'probe'))}`], 10_000);
    if (r.status === 0 && existsSync(join(o.upper, 'probe')) && !existsSync(join(o.target, 'probe'))) return { review: true, how };
    const said = (r.stderr || r.error?.message || `exit ${r.status}`).trim().split('\n').pop();
    const fix = root
      ? 'the kernel needs overlayfs (modprobe overlay) and the daemon CAP_SYS_ADMIN (a container may drop it)'
      : 'the kernel must allow overlayfs in user namespaces (Linux 5.11 or newer) and unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0), or run the daemon as root';
    return { review: false, reason: `cannot mount an overlay for a session (${said}): ${fix}` };
  } finally {
    removeProbe(dir);
  }
}

/** Run a command to its end without holding the thread: its exit status, what it said on stderr (the first 64 KiB), or why it could not run. */
function run(file: string, args: string[], timeoutMs: number): Promise<{ status: number | null; stderr: string; error?: Error }> {
  return new Promise((resolve) => {
    let stderr = '';
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'], timeout: timeoutMs });
    child.stderr!.setEncoding('utf8').on('data', (d: string) => {
      if (stderr.length < 65_536) stderr += d;
    });
    child.once('error', (error) => resolve({ status: null, stderr, error }));
    child.once('close', (status) => resolve({ status, stderr }));
  });
}

/** The probe's directory goes; one the state directory will not let go of is left, never a failed answer. */
function removeProbe(dir: string): void {
  try {
    // The kernel's work directories of a volatile overlay (mode 000): opened first, for a daemon that is not root.
    openWork(join(dir, 'work'));
    rmSync(dir, { recursive: true, force: true });
  } catch {
    // left behind: a small directory of its own, harmless
  }
}

