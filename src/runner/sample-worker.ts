import { readFileSync, readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import { loadAddon } from '../base/addon.js';
import { KeptFiles } from '../cgroup/files.js';
import { readUsage, type UsagePlan } from '../cgroup/session.js';
import { readPorts, readTable, type PortsPlan, type PortsReading, type Table } from './ports-read.js';
import { putUsage, USAGE_FIELDS, type FromSampleThread, type SamplePriority, type ToSampleThread } from './sample-thread.js';

/**
 * The samplers' thread (sample-thread.ts starts it): reads each batch of usage or ports plans it
 * is sent and answers what it read. First it asks to run only when nothing else wants the CPU.
 */
const port = parentPort;
if (!port) throw new Error('sample-worker.js runs as the samplers\' thread (node:worker_threads), not on its own');

/**
 * SCHED_IDLE for this thread (the addon: Node has no call for a policy), else nice 19 for its
 * task id (os.setPriority takes a tid as a pid: Linux sets a nice value per thread). The bench
 * pins the daemon's threads to one core, where the priority is what decides whether a request
 * preempts a read at once; SCHED_IDLE does, nice 19 still gets a small share of the core.
 */
function lowerPriority(): SamplePriority {
  const addon = loadAddon<{ idleThread(): boolean; nameThread?(name: string): boolean }>(['idleThread']);
  // Named as the looks thread is (procctl-looks): ps and top -H tell it from Node's own threads.
  if (!(addon instanceof Error)) {
    try {
      addon.nameThread?.('procctl-sampler');
    } catch {
      // unnamed, as Node's threads are
    }
  }
  if ((workerData as { lowPriority?: boolean } | null)?.lowPriority === false) return 'normal';
  if (!(addon instanceof Error)) {
    try {
      if (addon.idleThread()) return 'idle';
    } catch {
      // refused: a nice value then
    }
  }
  try {
    setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 19);
    return 'nice 19';
  } catch {
    return 'normal';
  }
}

/** This thread's CPU time so far, in ms (schedstat's first field: ns on the CPU). */
function cpuMs(): number {
  try {
    return Number(readFileSync('/proc/thread-self/schedstat', 'latin1').split(' ')[0]) / 1e6;
  } catch {
    return 0;
  }
}

/** The plans this thread holds, by key (those of the last batch of each kind). */
const usagePlans = new Map<number, UsagePlan>();
const portsPlans = new Map<number, { plan: PortsPlan; last?: { pids: string; tables: string } }>();

/** Keep the plans a batch brings and those of its keys; let go of the rest. */
function keep<P>(plans: Map<number, P>, ids: Int32Array, added: [number, P][]): void {
  for (const [id, p] of added) plans.set(id, p);
  if (plans.size > ids.length) {
    const listed = new Set(ids);
    for (const id of plans.keys()) if (!listed.has(id)) plans.delete(id);
  }
}

/** The files each sampler reads, kept open from one batch to the next (closed once a batch reads them no more). */
const usageFiles = new KeptFiles();
const portsFiles = new KeptFiles();

/** With no batch this long (nobody asks for samples), every kept file is closed. */
const KEPT_IDLE_MS = 10_000;
let keptIdle: NodeJS.Timeout | undefined;
function closeKeptLater(): void {
  clearTimeout(keptIdle);
  keptIdle = setTimeout(() => {
    usageFiles.closeAll();
    portsFiles.closeAll();
  }, KEPT_IDLE_MS);
  keptIdle.unref();
}

/** The last read of each namespace's table, for its growth (this thread's clock, apart from the daemon's). */
const tables = new Map<string, Table>();
let growthClock = 0;
const tick = () => `t${++growthClock}`;

function answer(m: ToSampleThread): { answer: FromSampleThread; transfer: ArrayBuffer[] } {
  const from = cpuMs();
  if (m.kind === 'usage') {
    keep(usagePlans, m.ids, m.plans);
    const figures = new Float64Array(m.ids.length * USAGE_FIELDS).fill(NaN);
    for (let i = 0; i < m.ids.length; i++) {
      const plan = usagePlans.get(m.ids[i]);
      if (plan === undefined) continue;
      try {
        putUsage(figures, i, readUsage(plan, false, usageFiles.read));
      } catch {
        // not read: the held sample stays
      }
    }
    usageFiles.sweep();
    return { answer: { id: m.id, kind: 'usage', figures, cpuMs: cpuMs() - from }, transfer: [figures.buffer as ArrayBuffer] };
  }
  keep(portsPlans, m.ids, m.plans.map(([id, plan]) => [id, { plan }]));
  for (const id of m.forget) {
    const p = portsPlans.get(id);
    if (p) p.last = undefined;
  }
  // One read of each namespace's table serves the whole batch.
  const now = Date.now();
  const read = new Map<string, Table>();
  const tableOf = (ns: string, pid: number) => {
    let t = read.get(ns);
    if (t === undefined) {
      t = readTable(pid, ns, now, tables.get(ns), tick);
      read.set(ns, t);
      tables.set(ns, t);
    }
    return t;
  };
  const looked: [number, PortsReading][] = [];
  for (let i = 0; i < m.ids.length; i++) {
    const p = portsPlans.get(m.ids[i]);
    if (p === undefined) continue;
    try {
      const r = readPorts(p.last ? { ...p.plan, last: p.last } : p.plan, tableOf, portsFiles.read);
      p.last = { pids: r.pids, tables: r.tables };
      if (r.sockets !== undefined) looked.push([i, r]);
    } catch {
      // not read: the held look stays
    }
  }
  portsFiles.sweep();
  // Namespaces no session is in any more go.
  for (const ns of tables.keys()) if (!read.has(ns)) tables.delete(ns);
  return { answer: { id: m.id, kind: 'ports', looked, tables: read, cpuMs: cpuMs() - from }, transfer: [] };
}

port.postMessage({ kind: 'ready', priority: lowerPriority() } satisfies FromSampleThread);
port.on('message', (m: ToSampleThread) => {
  const { answer: a, transfer } = answer(m);
  closeKeptLater();
  port.postMessage(a, transfer);
});
