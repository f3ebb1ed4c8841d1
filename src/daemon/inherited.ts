import { closeSync, fstatSync, readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import { listenFds } from './systemd.js';

/** fdinfo's flags: close-on-exec, and the access mode. */
const O_CLOEXEC = 0o2000000;
const O_ACCMODE = 0o3;

interface Descriptor {
  fd: number;
  /** What /proc/self/fd says it is: a path, `pipe:[inode]`, `socket:[inode]`, `anon_inode:[eventfd]`. */
  target: string;
  /** fdinfo's flags, read when first asked: a planned restart hands over hundreds of descriptors that are kept without asking. */
  flags(): number;
}

function descriptors(): Descriptor[] {
  const out: Descriptor[] = [];
  for (const name of readdirSync('/proc/self/fd')) {
    const fd = Number(name);
    let target: string;
    try {
      target = readlinkSync(`/proc/self/fd/${fd}`);
    } catch {
      continue; // the listing's own descriptor, closed by now
    }
    let flags: number | undefined;
    out.push({ fd, target, flags: () => (flags ??= fdFlags(fd)) });
  }
  return out;
}

/** A descriptor's flags from fdinfo; 0 (not close-on-exec: closed) when it cannot be read. */
function fdFlags(fd: number): number {
  try {
    return Number.parseInt(/^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, 'latin1'))?.[1] ?? '', 8);
  } catch {
    return 0;
  }
}

/**
 * Close the descriptors above 2 the daemon inherited (SPEC §12): a pipe or file left open by
 * whoever started it would reach every job, and keeps that starter waiting for an end of file.
 * Called first thing at start. Node marks what it inherited close-on-exec, but only up to the
 * first gap past fd 15, and its own descriptors are close-on-exec too, so the flag alone cannot
 * tell them apart: a descriptor is kept only if it is a socket activation's (LISTEN_FDS), Node's
 * IPC channel, or close-on-exec and of a kind Node makes for itself (an anonymous inode such
 * as its epoll and eventfd, /dev/null, one end of a pipe whose other end it holds too). What is
 * kept that way reaches no job: every spawner honours close-on-exec. `handedOver`: the descriptors a
 * planned restart named (SPEC §19), kept (and made close-on-exec again by the caller). Returns what it closed.
 */
export function closeInherited(env: NodeJS.ProcessEnv = process.env, handedOver: readonly number[] = []): number[] {
  const keep = new Set([...listenFds(env), ...handedOver]);
  const channel = (process as { channel?: { fd?: number } }).channel?.fd;
  if (channel !== undefined) keep.add(channel);
  const all = descriptors();
  const pipeEnds = (d: Descriptor) => new Set(all.filter((o) => o.target === d.target).map((o) => o.flags() & O_ACCMODE));
  const nodes = (d: Descriptor) =>
    d.target.startsWith('anon_inode:') || d.target === '/dev/null' || (d.target.startsWith('pipe:') && pipeEnds(d).size === 2);
  const closed: number[] = [];
  for (const d of all) {
    if (d.fd <= 2 || keep.has(d.fd)) continue;
    if ((d.flags() & O_CLOEXEC) !== 0 && nodes(d)) continue;
    try {
      closeSync(d.fd);
      closed.push(d.fd);
    } catch {
      // gone already
    }
  }
  return closed;
}

/**
 * The regular files behind the daemon's stdout and stderr (`procctld > daemon.log`), by the path
 * that leads to them now: looked up each time, so a file renamed since is found under its new
 * name, and one deleted (no path leads to it) is left out rather than hidden by a name it lost.
 */
export function stdioFiles(): string[] {
  const files: string[] = [];
  for (const fd of [1, 2]) {
    try {
      const st = fstatSync(fd);
      if (!st.isFile() || st.nlink === 0) continue;
      const path = readlinkSync(`/proc/self/fd/${fd}`);
      // The path names this very file (not one of another mount namespace, nor a namesake).
      const there = statSync(path, { throwIfNoEntry: false });
      if (there?.dev === st.dev && there.ino === st.ino && !files.includes(path)) files.push(path);
    } catch {
      // closed, or not a file we can name
    }
  }
  return files;
}
