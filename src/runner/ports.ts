import type { ListenPort, Session } from '../session/session.js';
import { cgroupOf } from './cgroup.js';
import { readPorts, readTable, type PortsPlan, type PortsReading, type Table } from './ports-read.js';
import { samplingThread } from './sample-thread.js';
import { samplerTiming, UsageSampler, type Walkable } from './usage.js';

export { listenRows, parseLocal } from './ports-read.js';

/**
 * The TCP ports a session's processes listen on (SPEC §20), from the session's own sockets: its
 * processes' descriptors give socket inodes, and the listening TCP sockets of each process's
 * network namespace (a sandboxed session may have its own; the kernel's socket diagnostics, else
 * /proc/PID/net/tcp{,6}: ports-read.ts) say which inodes listen where. Nothing host-wide is
 * guessed: a port some other process opened is not the session's, whatever its number.
 */

/** A namespace's LISTEN table is read again after this long (one read serves every session in it meanwhile). */
const TABLE_MS = 250;

/** The tables this thread read, by namespace (the sampling thread keeps its own). */
const tables = new Map<string, Table>();
let growthClock = 0;
const tick = () => String(++growthClock);

/** The listening sockets of the network namespace `ns`, read through `pid`'s view of it (kept TABLE_MS). */
function tableOf(ns: string, pid: number, now: number, fresh: boolean): Table {
  const hit = tables.get(ns);
  if (hit && now - hit.at < TABLE_MS && !fresh) return hit;
  const table = readTable(pid, ns, now, hit, tick);
  tables.set(ns, table);
  // Namespaces of ended sandboxes go: none is kept past its time unless asked again.
  if (tables.size > 64) for (const [k, t] of tables) if (now - t.at >= TABLE_MS) tables.delete(k);
  return table;
}

/** What one look found, and what it depended on: with the same processes and no new listening socket, only a close can change the ports. */
interface Look {
  /** Each port found, by its socket's inode and namespace. */
  found: { inode: string; ns: string; port: ListenPort }[];
  ports: ListenPort[];
  pids: string;
  /** Each namespace's growth when the descriptors were read. */
  tables: string;
  /** Made from the samplers' thread's reads (its growth clock, and its own last look at the session). */
  byThread: boolean;
}

const looks = new WeakMap<Session, Look>();

const byPort = (a: ListenPort, b: ListenPort) => a.port - b.port || (a.address < b.address ? -1 : a.address > b.address ? 1 : 0);

/** Whose ports a look at `s` reads: plain data (the sampling thread reads it without the session). */
function where(s: Session): PortsPlan {
  const cg = cgroupOf(s);
  return cg ? { members: cg.usagePlan().members } : { leader: s.pid };
}

/** What a look here reads: where, and what its last look depended on. */
function plan(s: Session): PortsPlan {
  const last = looks.get(s);
  return last ? { ...where(s), last: { pids: last.pids, tables: last.tables } } : where(s);
}

/**
 * Look at a session's ports now (the reads: ports-read.ts readPorts). The session is told what
 * was found (Session.notePorts keeps the last seen, for its record).
 */
export function lookAtPorts(s: Session, now = Date.now(), fresh = false): ListenPort[] {
  const seen = new Map<string, Table>();
  const reading = readPorts(plan(s), (ns, pid) => {
    const t = tableOf(ns, pid, now, fresh);
    seen.set(ns, t);
    return t;
  });
  return takePorts(s, reading, (ns) => seen.get(ns))!;
}

/**
 * What a look's reading says of `s`'s ports, kept (note): with the same processes and tables as
 * its last look, what that found less what closed since; else what the descriptors read now
 * listen on. Undefined when the reading read no descriptors but the session's last look is not the
 * one its plan named (a look here came between): the held ports stay until the next.
 */
export function takePorts(s: Session, r: PortsReading, table: (ns: string) => Table | undefined, byThread = false): ListenPort[] | undefined {
  const last = looks.get(s);
  if (r.sockets === undefined) {
    if (!last || last.pids !== r.pids || last.tables !== r.tables) return last?.ports;
    // Nothing new listens and its processes are the same: what it found, less what closed since.
    return kept(s, last, table);
  }
  const found: Look['found'] = [];
  for (const { ns, inodes } of r.sockets) {
    const listening = table(ns)?.listening;
    if (!listening) continue;
    for (const inode of new Set(inodes)) {
      const port = listening.get(inode);
      if (port) found.push({ inode, ns, port });
    }
  }
  return note(s, found, r.pids, r.tables, byThread);
}

/** What `last` found that still listens; the session told when something closed. */
function kept(s: Session, last: Look, table: (ns: string) => Table | undefined): ListenPort[] {
  const still = last.found.filter((f) => table(f.ns)?.listening.has(f.inode));
  if (still.length === last.found.length) return last.ports;
  return note(s, still, last.pids, last.tables, last.byThread);
}

/** Keep what a look found and tell the session its ports: each address and port once, by port. */
function note(s: Session, found: Look['found'], pids: string, tables: string, byThread: boolean): ListenPort[] {
  const unique = new Map<string, ListenPort>();
  for (const f of found) unique.set(`${f.port.address}\0${f.port.port}`, f.port);
  const ports = [...unique.values()].sort(byPort);
  looks.set(s, { found, ports, pids, tables, byThread });
  s.notePorts(ports);
  return ports;
}

/** Running sessions' ports, one held look each while they are asked for, read again once a second (as usage is, runner/usage.ts). */
const sampler = new UsageSampler<Session, ListenPort[]>(
  (s) => lookAtPorts(s),
  (s) => s.running,
  // 2% of the daemon's thread where it reads (runner/cgroup.ts has the other 3% of the samplers'
  // 5%); 10% of a core on the samplers' thread (the usage sampler has 15%).
  samplerTiming(0.02, 'ports', 0.1),
  undefined,
  {
    // The refresh's reads on the samplers' thread (runner/sample-thread.ts); what they found is kept here.
    read: (sessions, ids, fresh) =>
      samplingThread.ports(ids, fresh, (i) => where(sessions[i]))?.then((b) => {
        const looked = new Map(b.looked);
        const table = (ns: string) => b.tables.get(ns);
        return {
          cpuMs: b.cpuMs,
          sample: (i: number, held: ListenPort[]) => {
            const s = sessions[i];
            const r = looked.get(i);
            if (r !== undefined) return takePorts(s, r, table, true);
            // Its processes and namespaces' growth were those of the thread's last look at it: that one's ports, less what closed.
            const last = looks.get(s);
            if (last === undefined || !last.byThread) {
              // The last look was made here: the thread's says nothing of it. Read in full next time.
              samplingThread.lookAgain(ids[i]);
              return held;
            }
            if (last.found.length === 0) return last.ports;
            return kept(s, last, table);
          },
        };
      }),
  },
);

/**
 * Keep a running session's ports looked at while someone asks (list, poll): the first ask looks
 * now, and then once a second off the requests. What it found is on the session (`ports`).
 */
export function askPorts(s: Session): void {
  if (s.running && s.pid !== undefined) sampler.of(s);
}

/** askPorts for many sessions: the first looks a few per turn (UsageSampler.hold); a promise when some must wait. */
export function askPortsOf(sessions: Walkable<Session>): Promise<void> | undefined {
  return sampler.hold(sessions, looked);
}

const looked = (s: Session) => s.running && s.pid !== undefined;

/** Moves whenever a session's ports are first looked at or let go, or a refresh begins: equal to one taken before, every session asked for then is still looked at and counted as asked for (UsageSampler.mark). */
export function portsMark(): number {
  return sampler.mark;
}

/** Look at a running session's ports now, its namespaces' tables read anew (an exec's answer after its wait), and keep them looked at. */
export function askPortsNow(s: Session): void {
  if (!s.running || s.pid === undefined) return;
  lookAtPorts(s, Date.now(), true);
  // Held from here on; a first hold looks again, which finds the same processes and tables and reads nothing more.
  sampler.of(s);
}
