import { readFileSync, readlinkSync } from 'node:fs';
import { setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { loadAddon } from '../base/addon.js';
import { readUsage } from '../cgroup/session.js';
import { readPorts, readTable, type Table } from './ports-read.js';
import type { FromSampleThread, SamplePriority, ToSampleThread } from './sample-thread.js';

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
  const addon = loadAddon<{ idleThread(): boolean }>(['idleThread']);
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

/** The last read of each namespace's table, for its growth (this thread's clock, apart from the daemon's). */
const tables = new Map<string, Table>();
let growthClock = 0;
const tick = () => `t${++growthClock}`;

function answer(m: ToSampleThread): FromSampleThread {
  const from = cpuMs();
  if (m.kind === 'usage') {
    const readings = m.plans.map((plan) => {
      try {
        return readUsage(plan);
      } catch {
        return null;
      }
    });
    return { id: m.id, kind: 'usage', readings, cpuMs: cpuMs() - from };
  }
  // One read of each namespace's table serves the whole batch.
  const now = Date.now();
  const read = new Map<string, Table>();
  const tableOf = (ns: string, pid: number) => {
    let t = read.get(ns);
    if (t === undefined) {
      t = readTable(pid, now, tables.get(ns), tick);
      read.set(ns, t);
      tables.set(ns, t);
    }
    return t;
  };
  const readings = m.plans.map((plan) => {
    try {
      return readPorts(plan, tableOf);
    } catch {
      return null;
    }
  });
  // Namespaces no session is in any more go.
  for (const ns of tables.keys()) if (!read.has(ns)) tables.delete(ns);
  return { id: m.id, kind: 'ports', readings, tables: read, cpuMs: cpuMs() - from };
}

port.postMessage({ kind: 'ready', priority: lowerPriority() } satisfies FromSampleThread);
port.on('message', (m: ToSampleThread) => port.postMessage(answer(m)));
