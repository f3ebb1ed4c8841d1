import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { endianness } from 'node:os';
import { loadAddon } from '../base/addon.js';
import { readFile, readPids, type ReadText } from '../cgroup/files.js';
import type { ListenPort } from '../session/session.js';
import { childrenOf } from './procfs.js';

/**
 * The reads of a look at a session's ports (runner/ports.ts), from plain data: which processes,
 * their network namespaces, those namespaces' LISTEN tables and, when they may have changed, the
 * processes' socket descriptors. No session here: the sampling thread (sample-worker.ts) makes
 * these reads for the daemon's periodic refresh, and ports.ts keeps what they found.
 */

/** Descriptors looked at per session and sample, at most: a job holding more is not read past them. */
const MAX_FDS = 10_000;

/** A network namespace's listening sockets, as one read found them. */
export interface Table {
  at: number;
  /** Listening socket inode → where it listens. */
  listening: Map<string, ListenPort>;
  /**
   * Changed by each read that found a listening socket the read before it had not: a session's
   * descriptors matter again only then. Each reader's own clock, told apart by its prefix, so
   * two readers' values never match by chance.
   */
  growth: string;
}

const little = endianness() === 'LE';

/** `0100007F` (a 32-bit word as /proc writes it, in host order) → its four bytes in network order. */
function wordBytes(hex: string, out: number[]): void {
  const b = [0, 2, 4, 6].map((i) => parseInt(hex.slice(i, i + 2), 16));
  out.push(...(little ? b.reverse() : b));
}

/** An IPv6 address as RFC 5952 writes it: lower case, the longest run of zero groups as `::`, v4-mapped with its dotted tail. */
function ipv6Text(bytes: number[]): string {
  if (bytes.slice(0, 10).every((b) => b === 0) && bytes[10] === 0xff && bytes[11] === 0xff) return `::ffff:${bytes.slice(12).join('.')}`;
  const groups = Array.from({ length: 8 }, (_, i) => (bytes[2 * i] << 8) | bytes[2 * i + 1]);
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === 0) j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  const hex = groups.map((g) => g.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/** `0100007F:1F90` (tcp) or 32 hex digits and a port (tcp6) → address and port. */
export function parseLocal(field: string, v6: boolean): ListenPort {
  const [hex, portHex] = field.split(':');
  const bytes: number[] = [];
  for (let i = 0; i < hex.length; i += 8) wordBytes(hex.slice(i, i + 8), bytes);
  return { address: v6 ? ipv6Text(bytes) : bytes.join('.'), port: parseInt(portHex, 16) };
}

/** What native/sockdiag.c gives: a namespace's listening TCP sockets, 24 bytes each (inode, family, port, address). */
type SockDiag = { listeningSockets(nsPath: string | null, nsInode?: number): Buffer };
const RECORD = 24;
const EPERM = 1;
/** Errors that mean this kernel gives no socket diagnostics here: ENOENT, EACCES, EPROTONOSUPPORT, EOPNOTSUPP, EAFNOSUPPORT (and EPERM). */
const MISSING = new Set([2, 13, 93, 95, 97]);

let diag: SockDiag | null | undefined;
/** This thread's own network namespace (each thread reads it for itself: the samplers' thread has its own module). */
let ownNs: string | undefined;
/** The kernel refused to let this process join another namespace (setns needs CAP_SYS_ADMIN): those are read from /proc. */
let joinRefused = false;

/**
 * A namespace's listening sockets from the kernel's socket diagnostics (netlink): undefined where
 * they cannot be had (no addon, a kernel without them, a namespace this process may not join),
 * and /proc is read instead. /proc/<pid>/net/tcp and tcp6 walk every bucket of the established
 * table to print a few lines: 4 ms a read on the bench's host (24 GB: 262,144 buckets), 8 ms a
 * look at both, in the kernel, where a kernel built without preemption lets nothing else run on
 * that core meanwhile; asked for LISTEN sockets, the kernel walks its listening table alone: 25
 * µs, 90 µs where a thread made for the question joins another namespace.
 */
export function listeningFromKernel(pid: number, ns: string): Map<string, ListenPort> | undefined {
  if (diag === undefined) {
    const a = loadAddon<SockDiag>(['listeningSockets']);
    diag = a instanceof Error ? null : a;
  }
  if (diag === null) return undefined;
  try {
    ownNs ??= readlinkSync('/proc/thread-self/ns/net');
  } catch {
    return undefined;
  }
  const own = ns === ownNs;
  if (!own && joinRefused) return undefined;
  // `net:[4026531840]`: the namespace's inode, which the file opened must be.
  const inode = own ? undefined : Number(/\[(\d+)\]/.exec(ns)?.[1]);
  if (inode !== undefined && !Number.isSafeInteger(inode)) return undefined;
  let records: Buffer;
  try {
    records = diag.listeningSockets(own ? null : `/proc/${pid}/ns/net`, inode);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).errno ?? 0;
    // EPERM: this process may not join it, nor any other. The process gone (ENOENT, ESRCH), or
    // descriptors or memory short for a moment (EMFILE, ENFILE, ENOMEM, ENOBUFS): this read only.
    if (!own && code === EPERM) joinRefused = true;
    // Asked in its own namespace, what says the kernel has no such diagnostics or refuses them stands: /proc from now on.
    if (own && (MISSING.has(code) || code === EPERM)) diag = null;
    return undefined;
  }
  const out = new Map<string, ListenPort>();
  for (let at = 0; at + RECORD <= records.length; at += RECORD) {
    const v6 = records[at + 4] === 6;
    const bytes = [...records.subarray(at + 8, at + (v6 ? 24 : 12))];
    out.set(String(records.readUInt32LE(at)), { address: v6 ? ipv6Text(bytes) : bytes.join('.'), port: records.readUInt16LE(at + 6) });
  }
  return out;
}

/** The LISTEN rows of a /proc/net/tcp or tcp6 text: inode → where it listens. */
export function listenRows(text: string, v6: boolean, into = new Map<string, ListenPort>()): Map<string, ListenPort> {
  for (const line of text.split('\n').slice(1)) {
    const f = line.trim().split(/\s+/);
    // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …; 0A is TCP_LISTEN.
    if (f.length < 10 || f[3] !== '0A' || f[9] === '0') continue;
    into.set(f[9], parseLocal(f[1], v6));
  }
  return into;
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'latin1');
  } catch {
    return '';
  }
}

/**
 * Read the listening sockets of namespace `ns` (as /proc/<pid>/ns/net names it) through `pid`'s
 * view of it; `prev` is the last read of it, `tick` the reader's growth clock.
 */
export function readTable(pid: number, ns: string, now: number, prev: Table | undefined, tick: () => string): Table {
  let listening = listeningFromKernel(pid, ns);
  if (listening === undefined) {
    listening = listenRows(readText(`/proc/${pid}/net/tcp`), false);
    listenRows(readText(`/proc/${pid}/net/tcp6`), true, listening);
  }
  const growth = prev && ![...listening.keys()].some((inode) => !prev.listening.has(inode)) ? prev.growth : tick();
  return { at: now, listening, growth };
}

/** Whose ports to look at: a session's cgroup (its cgroup.procs' directory), else its leader and the leader's descendants. */
export interface PortsPlan {
  members?: string;
  leader?: number;
  /** What the session's last look depended on (Look.pids and Look.tables): with both the same, no descriptor is read. */
  last?: { pids: string; tables: string };
}

/** What one look read. */
export interface PortsReading {
  /** Its processes, as a key. */
  pids: string;
  /** Each namespace it is in and that namespace's growth, as a key. */
  tables: string;
  /** The namespaces it is in. */
  namespaces: string[];
  /** Per process, its namespace and socket inodes; absent when the plan's `last` matched (nothing new can listen). */
  sockets?: { ns: string; inodes: string[] }[];
}

/** The processes of a plan now. */
function processesOf(plan: PortsPlan, read: ReadText): number[] {
  if (plan.members !== undefined) return readPids(plan.members, read);
  if (plan.leader === undefined) return [];
  const out: number[] = [];
  for (const queue = [plan.leader]; queue.length > 0 && out.length < 10_000; ) {
    const pid = queue.pop()!;
    out.push(pid);
    queue.push(...childrenOf(pid));
  }
  return out;
}

/** The socket inodes among a process's descriptors (up to `budget` descriptors looked at); how many it looked at. */
function socketsOf(pid: number, into: string[], budget: number): number {
  let fds: string[];
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch {
    return 0;
  }
  const n = Math.min(fds.length, budget);
  for (let i = 0; i < n; i++) {
    let target: string;
    try {
      target = readlinkSync(`/proc/${pid}/fd/${fds[i]}`);
    } catch {
      continue;
    }
    if (target.startsWith('socket:[')) into.push(target.slice(8, -1));
  }
  return n;
}

/**
 * Read a look at a plan's ports. Cheap when nothing moved: the descriptors are read only when its
 * set of processes changed or a namespace it is in has a listening socket it had not at the last
 * read (a listen anywhere in it); a close needs no read, its socket is simply gone from the table.
 * `tableOf` gives a namespace's table, read through a process in it.
 */
export function readPorts(plan: PortsPlan, tableOf: (ns: string, pid: number) => Table, read: ReadText = readFile): PortsReading {
  const pids = processesOf(plan, read);
  const nsOf = new Map<number, string>();
  const seen = new Map<string, Table>();
  for (const pid of pids) {
    let ns: string;
    try {
      ns = readlinkSync(`/proc/${pid}/ns/net`);
    } catch {
      continue;
    }
    nsOf.set(pid, ns);
    if (!seen.has(ns)) seen.set(ns, tableOf(ns, pid));
  }
  const reading: PortsReading = {
    pids: pids.join(','),
    tables: [...seen].map(([ns, t]) => `${ns}=${t.growth}`).join(';'),
    namespaces: [...seen.keys()],
  };
  if (plan.last && plan.last.pids === reading.pids && plan.last.tables === reading.tables) return reading;
  reading.sockets = [];
  // Nothing listens in any of its namespaces: no descriptor needs reading.
  if (![...seen.values()].some((t) => t.listening.size > 0)) return reading;
  let budget = MAX_FDS;
  for (const pid of pids) {
    const ns = nsOf.get(pid);
    const table = ns === undefined ? undefined : seen.get(ns);
    if (!table || table.listening.size === 0 || budget <= 0) continue;
    const inodes: string[] = [];
    budget -= socketsOf(pid, inodes, budget);
    reading.sockets.push({ ns: ns!, inodes });
  }
  return reading;
}
