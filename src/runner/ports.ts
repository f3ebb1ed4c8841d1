import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { endianness } from 'node:os';
import type { ListenPort, Session } from '../session/session.js';
import { cgroupOf } from './cgroup.js';
import { childrenOf } from './procfs.js';
import { samplerTiming, UsageSampler } from './usage.js';

/**
 * The TCP ports a session's processes listen on (SPEC §20), from the session's own sockets: its
 * processes' descriptors give socket inodes, and the LISTEN rows of /proc/PID/net/tcp{,6} of
 * each process's network namespace (a sandboxed session may have its own) say which inodes
 * listen where. Nothing host-wide is guessed: a port some other process opened is not the
 * session's, whatever its number.
 */

/** Descriptors looked at per session and sample, at most: a job holding more is not read past them. */
const MAX_FDS = 10_000;
/** A namespace's LISTEN table is read again after this long (one read serves every session in it meanwhile). */
const TABLE_MS = 250;

interface Table {
  at: number;
  /** Listening socket inode → where it listens. */
  listening: Map<string, ListenPort>;
  /** Bumped by each read that found a listening socket the read before it had not: a session's descriptors matter again only then. */
  growth: number;
}

const tables = new Map<string, Table>();
let growthClock = 0;

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

/** The listening sockets of the network namespace `ns`, read through `pid`'s view of it (kept TABLE_MS). */
function tableOf(ns: string, pid: number, now: number, fresh: boolean): Table {
  const hit = tables.get(ns);
  if (hit && now - hit.at < TABLE_MS && !fresh) return hit;
  const listening = listenRows(readText(`/proc/${pid}/net/tcp`), false);
  listenRows(readText(`/proc/${pid}/net/tcp6`), true, listening);
  // One clock for all namespaces: a table made anew (its namespace let go meanwhile) never repeats an old value.
  const growth = hit && ![...listening.keys()].some((inode) => !hit.listening.has(inode)) ? hit.growth : ++growthClock;
  const table = { at: now, listening, growth };
  tables.set(ns, table);
  // Namespaces of ended sandboxes go: none is kept past its time unless asked again.
  if (tables.size > 64) for (const [k, t] of tables) if (now - t.at >= TABLE_MS) tables.delete(k);
  return table;
}

/** The processes of a session now: its cgroup's members, else its leader and the leader's descendants. */
function processesOf(s: Session): number[] {
  const cg = cgroupOf(s);
  if (cg) return cg.members();
  if (s.pid === undefined) return [];
  const out: number[] = [];
  for (const queue = [s.pid]; queue.length > 0 && out.length < 10_000; ) {
    const pid = queue.pop()!;
    out.push(pid);
    queue.push(...childrenOf(pid));
  }
  return out;
}

/** The socket inodes among a process's descriptors (up to `budget` descriptors looked at); how many it looked at. */
function socketsOf(pid: number, into: Set<string>, budget: number): number {
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
    if (target.startsWith('socket:[')) into.add(target.slice(8, -1));
  }
  return n;
}

/** What one look found, and what it depended on: with the same processes and no new listening socket, only a close can change the ports. */
interface Look {
  /** Each port found, by its socket's inode and namespace. */
  found: { inode: string; ns: string; port: ListenPort }[];
  ports: ListenPort[];
  pids: string;
  /** Each namespace's growth when the descriptors were read. */
  tables: string;
}

const looks = new WeakMap<Session, Look>();

const byPort = (a: ListenPort, b: ListenPort) => a.port - b.port || (a.address < b.address ? -1 : a.address > b.address ? 1 : 0);

/**
 * Look at a session's ports now. Cheap when nothing moved: the descriptors are read only when its
 * set of processes changed or a namespace it is in has a listening socket it had not at the last
 * read (a listen anywhere in it); a close needs no read, its socket is simply gone from the
 * table. The session is told what was found (Session.notePorts keeps the last seen, for its record).
 */
export function lookAtPorts(s: Session, now = Date.now(), fresh = false): ListenPort[] {
  const pids = processesOf(s);
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
    if (!seen.has(ns)) seen.set(ns, tableOf(ns, pid, now, fresh));
  }
  const pidKey = pids.join(',');
  const tableKey = [...seen].map(([ns, t]) => `${ns}=${t.growth}`).join(';');
  const last = looks.get(s);
  if (last && last.pids === pidKey && last.tables === tableKey) {
    // Nothing new listens and its processes are the same: what it found, less what closed since.
    const kept = last.found.filter((f) => seen.get(f.ns)?.listening.has(f.inode));
    if (kept.length === last.found.length) return last.ports;
    return note(s, kept, pidKey, tableKey);
  }
  const found: Look['found'] = [];
  // Nothing listens in any of its namespaces: no descriptor needs reading.
  if ([...seen.values()].some((t) => t.listening.size > 0)) {
    let budget = MAX_FDS;
    for (const pid of pids) {
      const ns = nsOf.get(pid);
      const table = ns === undefined ? undefined : seen.get(ns);
      if (!table || table.listening.size === 0 || budget <= 0) continue;
      const sockets = new Set<string>();
      budget -= socketsOf(pid, sockets, budget);
      for (const inode of sockets) {
        const port = table.listening.get(inode);
        if (port) found.push({ inode, ns: ns!, port });
      }
    }
  }
  return note(s, found, pidKey, tableKey);
}

/** Keep what a look found and tell the session its ports: each address and port once, by port. */
function note(s: Session, found: Look['found'], pids: string, tables: string): ListenPort[] {
  const unique = new Map<string, ListenPort>();
  for (const f of found) unique.set(`${f.port.address}\0${f.port.port}`, f.port);
  const ports = [...unique.values()].sort(byPort);
  looks.set(s, { found, ports, pids, tables });
  s.notePorts(ports);
  return ports;
}

/** Running sessions' ports, one held look each while they are asked for, read again once a second (as usage is, runner/usage.ts). */
const sampler = new UsageSampler<Session, ListenPort[]>(
  (s) => lookAtPorts(s),
  (s) => s.running,
  // 2% of the thread: the usage sampler has the other 3% of the samplers' 5% (runner/usage.ts).
  samplerTiming(0.02, 'ports'),
);

/**
 * Keep a running session's ports looked at while someone asks (list, poll): the first ask looks
 * now, and then once a second off the requests. What it found is on the session (`ports`).
 */
export function askPorts(s: Session): void {
  if (s.running && s.pid !== undefined) sampler.of(s);
}

/** askPorts for many sessions: the first looks a few per turn (UsageSampler.hold); a promise when some must wait. */
export function askPortsOf(sessions: Iterable<Session>): Promise<void> | undefined {
  return sampler.hold(sessions, looked);
}

const looked = (s: Session) => s.running && s.pid !== undefined;

/** Look at a running session's ports now, its namespaces' tables read anew (an exec's answer after its wait), and keep them looked at. */
export function askPortsNow(s: Session): void {
  if (!s.running || s.pid === undefined) return;
  lookAtPorts(s, Date.now(), true);
  // Held from here on; a first hold looks again, which finds the same processes and tables and reads nothing more.
  sampler.of(s);
}
