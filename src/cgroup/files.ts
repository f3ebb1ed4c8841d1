import { closeSync, constants, mkdirSync, openSync, readSync, readdirSync, rmdirSync, statfsSync, writeSync } from 'node:fs';
import { basename } from 'node:path';
import { rmdir } from 'node:fs/promises';

/** One buffer for every read: cgroup files are small, and the reads are synchronous. */
let scratch = Buffer.allocUnsafe(4096);

/**
 * A cgroup file's text, or undefined when it is not there (the cgroup is gone, or the kernel lacks
 * the file). open, read until the end, close: a third of what readFileSync costs on cgroupfs (it
 * stats first and allocates per call), and a session's end reads several of these on every exec.
 */
export function readFile(path: string): string | undefined {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY);
  } catch {
    return undefined;
  }
  try {
    return readOpen(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * The text of an open cgroup file (or a /proc one: runner/namespace.ts), read from its start at
 * given offsets (pread), so a descriptor kept open reads it anew each time (cgroupfs and procfs
 * make it again for a read at offset 0); undefined when it cannot be read (its cgroup is gone).
 */
export function readOpen(fd: number): string | undefined {
  try {
    let size = 0;
    for (;;) {
      if (size === scratch.length) {
        const bigger = Buffer.allocUnsafe(scratch.length * 2);
        scratch.copy(bigger, 0, 0, size);
        scratch = bigger;
      }
      const n = readSync(fd, scratch, size, scratch.length - size, size);
      if (n === 0) break;
      size += n;
    }
    return scratch.toString('latin1', 0, size);
  } catch {
    return undefined;
  }
}

/** Reads a file's whole text by its path (readFile, or KeptFiles' read). */
export type ReadText = (path: string) => string | undefined;

/**
 * Descriptors a KeptFiles holds at most: an eighth of the process's open-file limit (two are kept,
 * a quarter in all, the rest for sessions and clients), and never over 4,096. Past them a file is
 * opened, read and closed as readFile does.
 */
function maxKept(): number {
  const soft = /^Max open files\s+(\d+)/m.exec(readFile('/proc/self/limits') ?? '')?.[1];
  return Math.min(4096, Math.floor(Number(soft ?? 1024) / 8));
}

/**
 * Files read over and over (the samplers' thread reads every held session's cgroup and /proc files
 * once a second), each kept open and read from its start (readOpen): a read costs its pread calls
 * alone, where readFile also opens the file, walking its path through cgroupfs or procfs, and
 * closes it, two thirds of the syscalls and most of their time. `sweep` closes those not read since
 * the sweep before. A kept descriptor that no longer reads (its cgroup removed, its process gone)
 * is closed and the path opened once more: a pid may belong to a new process now. A v1 cgroup's
 * `cgroup.procs` or `tasks` is never kept: v1 makes the list once per open file and answers the
 * same list to every read after it while reads keep coming within a second (its pidlist cache),
 * so a kept one would miss the processes started since; cgroup2 reads the members anew.
 */
export class KeptFiles {
  /** By path: its descriptor, or -1 for a file read by path each time (a v1 member list), and the round it was last read in. */
  private readonly kept = new Map<string, { fd: number; round: number }>();
  private round = 0;
  /** Descriptors held open (entries with one). */
  private open = 0;
  private readonly max = maxKept();

  readonly read: ReadText = (path) => {
    const k = this.kept.get(path);
    if (k?.fd === -1) {
      k.round = this.round;
      return readFile(path);
    }
    if (k !== undefined) {
      const text = readOpen(k.fd);
      if (text !== undefined) {
        k.round = this.round;
        return text;
      }
      this.forget(path, k.fd);
    }
    if (this.open >= this.max) return readFile(path);
    // Known as one not to keep until the sweeps let go of it: statfs once, not at every read.
    if (!keepable(path)) {
      this.kept.set(path, { fd: -1, round: this.round });
      return readFile(path);
    }
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY);
    } catch {
      return undefined;
    }
    const text = readOpen(fd);
    if (text === undefined) closeSync(fd);
    else {
      this.kept.set(path, { fd, round: this.round });
      this.open++;
    }
    return text;
  };

  /** Close every kept file (nothing has been read for a while). */
  closeAll(): void {
    for (const [path, k] of this.kept) this.forget(path, k.fd);
  }

  /** Close the files not read since the last sweep. */
  sweep(): void {
    for (const [path, k] of this.kept) {
      if (k.round !== this.round) this.forget(path, k.fd);
    }
    this.round++;
  }

  /** Descriptors held open. */
  get size(): number {
    return this.open;
  }

  private forget(path: string, fd: number): void {
    this.kept.delete(path);
    if (fd < 0) return;
    closeSync(fd);
    this.open--;
  }
}

/** cgroup2's statfs magic: a member list there is read anew at every read of an open file. */
const CGROUP2_MAGIC = 0x63677270;

/** Whether a file may be kept open and read again (a v1 cgroup's member lists may not). */
function keepable(path: string): boolean {
  const name = basename(path);
  if (name !== 'cgroup.procs' && name !== 'tasks') return true;
  try {
    return statfsSync(path).type === CGROUP2_MAGIC;
  } catch {
    return false;
  }
}

/**
 * Write a value to a cgroup file. One write(2), no truncation or creation: cgroupfs takes a value
 * per write and refuses O_TRUNC on some files. Throws with the path in the message.
 */
export function writeFile(path: string, value: string): void {
  let fd: number | undefined;
  try {
    fd = openSync(path, constants.O_WRONLY);
    writeSync(fd, value);
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    throw Object.assign(new Error(`cannot write ${JSON.stringify(value)} to ${path}: ${e.code ?? e.message}`), { code: e.code });
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/** `key value` lines (cgroup.events, memory.events, cpu.stat, pids.events, memory.oom_control) as numbers. */
export function readKeyed(path: string, read: ReadText = readFile): Map<string, number> | undefined {
  return keyed(read(path));
}

/** `key value` lines as numbers (undefined in, undefined out). */
export function keyed(text: string | undefined): Map<string, number> | undefined {
  if (text === undefined) return undefined;
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    const space = line.indexOf(' ');
    if (space > 0) out.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return out;
}

/** One number from a file holding one (memory.current, pids.current, cpuacct.usage); undefined when absent or `max`. */
export function readNumber(path: string, read: ReadText = readFile): number | undefined {
  const text = read(path)?.trim();
  if (text === undefined || text === '' || text === 'max') return undefined;
  const n = Number(text);
  return Number.isFinite(n) ? n : undefined;
}

/** The processes of a cgroup (its cgroup.procs); empty when it is gone. */
export function readPids(dir: string, read: ReadText = readFile): number[] {
  const text = read(`${dir}/cgroup.procs`);
  if (!text) return [];
  const out: number[] = [];
  for (const line of text.split('\n')) if (line) out.push(Number(line));
  return out;
}

/** Resident memory of a process now (VmRSS of /proc/PID/status), 0 when it is gone. */
export function rssBytes(pid: number, read: ReadText = readFile): number {
  const text = read(`/proc/${pid}/status`);
  const m = text && /^VmRSS:\s+(\d+) kB/m.exec(text);
  return m ? Number(m[1]) * 1024 : 0;
}

/** Make a cgroup directory; true when it was made, false when it was there already. */
export function makeDir(dir: string): boolean {
  try {
    mkdirSync(dir);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

/** Remove an empty cgroup (rmdir; cgroupfs refuses `rm -r`): true when it is gone. */
export function removeDir(dir: string): boolean {
  try {
    rmdirSync(dir);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/**
 * removeDir off the event loop: a memory cgroup's rmdir takes the kernel a while (it offlines
 * the memcg), which an exec's round trip should not wait for.
 */
export async function removeDirLater(dir: string): Promise<boolean> {
  try {
    await rmdir(dir);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/** A cgroup and every cgroup below it, deepest first: the order rmdir takes them in. */
export function treeOf(dir: string): string[] {
  const out: string[] = [];
  for (const name of childDirs(dir)) out.push(...treeOf(`${dir}/${name}`));
  out.push(dir);
  return out;
}

/** Remove a cgroup and every cgroup below it, children first, each if empty: true when it is gone. */
export function removeTree(dir: string): boolean {
  let gone = false;
  for (const d of treeOf(dir)) gone = removeDir(d);
  return gone;
}

/** Child cgroups (directories) of a cgroup. */
export function childDirs(dir: string): string[] {
  try {
    return readdirSync(dir, { withFileTypes: true })
      .filter((e) => e.isDirectory())
      .map((e) => e.name);
  } catch {
    return [];
  }
}
