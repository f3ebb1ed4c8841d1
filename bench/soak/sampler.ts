import { readdirSync, readFileSync } from 'node:fs';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { BenchClient } from '../lib/client.js';
import { memoryKb } from '../lib/proc.js';
import { quantile, round } from '../lib/stats.js';
import type { ProbeReading } from './probe.js';

export interface LoopStats {
  /** Round trips timed in the window (those that overlapped a diagnostics call are left out). */
  n: number;
  p50: number;
  p99: number;
  max: number;
  errors: number;
}

export interface Sample {
  /** Seconds since the load started. */
  t: number;
  rssMB: number;
  /** The anonymous part of RSS (heap pages, malloc arenas, buffers); the rest is file-backed (node's code, libraries). */
  rssAnonMB: number;
  /** The daemon's guardian helper process, which tracks every session's process group. */
  guardianRssMB?: number;
  fds: number;
  /** Sessions the daemon holds: running ones, and finished ones not yet cleared, removed or reaped. */
  running: number;
  finished: number;
  /** Daemon CPU (utime + stime) over the window, % of one core; with its sessions' reaped children too. */
  cpuPct: number;
  cpuWithSessionsPct: number;
  guardianCpuPct?: number;
  /** The soak process itself (agents, subscribers, probe thread), % of one core. */
  soakCpuPct: number;
  /** Everything the soak puts on the machine: daemon, its sessions, guardian and the soak process. */
  totalCpuPct: number;
  /** The whole machine, all cores: 100 is every core busy. */
  machineBusyPct: number;
  load1: number;
  /** `daemon.status` round trips from the probe thread, ms. */
  loop: LoopStats;
  /** The soak's own event-loop delay p99, ms: high values mean the soak, not the daemon, was slow. */
  soakLoopP99Ms: number;
  /** From daemon.diagnostics every few samples: heap in use as it is (after a full GC only in the quiet figures, which count objects). */
  heapUsedMB?: number;
  externalMB?: number;
  objects?: Record<string, number>;
  resources?: Record<string, number>;
  /** How long the diagnostics call took, ms. */
  diagMs?: number;
  /** The daemon's own event-loop delay figures, when daemon.diagnostics reports them. */
  daemonLoopDelay?: unknown;
}

interface Cpu {
  self: number;
  children: number;
}

/** CPU of a process in ms: its own, and that of the children it has waited for. */
function cpuOf(pid: number): Cpu {
  const text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const f = text.slice(text.lastIndexOf(')') + 2).split(' ').map(Number);
  // utime, stime, cutime, cstime are fields 14-17 of stat: f[11..14]; 100 ticks a second.
  return { self: (f[11] + f[12]) * 10, children: (f[13] + f[14]) * 10 };
}

function machineTicks(): { busy: number; total: number } {
  const fields = readFileSync('/proc/stat', 'latin1').split('\n', 1)[0].trim().split(/\s+/).slice(1).map(Number);
  const total = fields.slice(0, 8).reduce((s, x) => s + x, 0);
  const idle = fields[3] + fields[4];
  return { busy: total - idle, total };
}

/** This process's CPU in ms, every thread. */
function soakCpu(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

export function fdCount(pid: number): number {
  return readdirSync(`/proc/${pid}/fd`).length;
}

export function rssAnonMB(pid: number): number {
  const m = /^RssAnon:\s+(\d+)/m.exec(readFileSync(`/proc/${pid}/status`, 'latin1'));
  return m ? round(Number(m[1]) / 1024, 1) : Number.NaN;
}

export function rssMB(pid: number): number {
  return round((memoryKb(pid)?.rss ?? Number.NaN) / 1024, 1);
}

const wallNow = () => performance.timeOrigin + performance.now();

/** Collects probe readings and turns the daemon's /proc figures and RPC answers into one sample per window. */
export class Sampler {
  readonly samples: Sample[] = [];
  /** Every probe round trip of the run: [seconds into the load when sent, ms], for percentiles over any stretch. */
  readonly allLoop: [number, number][] = [];
  probeErrors = 0;
  /** Probe readings left out because they overlapped a diagnostics call (its full GC stalls the daemon). */
  skippedProbes = 0;
  private readings: ProbeReading[] = [];
  private diagWindows: [number, number][] = [];
  private lastCpu: Cpu;
  private lastGuardianCpu = 0;
  private lastSoakCpu = 0;
  private loadStartedWall = 0;
  private lastMachine = machineTicks();
  private lastAt = wallNow();
  private readonly soakLoop = monitorEventLoopDelay({ resolution: 10 });
  private count = 0;
  private loadStartedAt = Date.now();

  constructor(
    private readonly pid: number,
    private readonly guardianPid: number | undefined,
    private readonly client: BenchClient,
    private readonly diagEvery: number,
  ) {
    this.lastCpu = cpuOf(pid);
    this.soakLoop.enable();
  }

  /** The load starts now: windows, CPU and probe readings count from here. */
  begin(at: number): void {
    this.loadStartedAt = at;
    this.lastCpu = cpuOf(this.pid);
    this.lastGuardianCpu = this.guardianCpu();
    this.lastSoakCpu = soakCpu();
    this.lastMachine = machineTicks();
    this.lastAt = wallNow();
    this.loadStartedWall = this.lastAt;
    this.readings = [];
    this.soakLoop.reset();
  }

  addProbe(r: ProbeReading): void {
    this.readings.push(r);
  }

  async sample(): Promise<Sample> {
    const at = wallNow();
    const seconds = (at - this.lastAt) / 1000;
    const cpu = cpuOf(this.pid);
    const guardianCpu = this.guardianCpu();
    const ownCpu = soakCpu();
    const machine = machineTicks();
    const pct = (ms: number) => round(ms / 10 / seconds, 1);
    const daemonAll = cpu.self + cpu.children - this.lastCpu.self - this.lastCpu.children;
    const status = await this.client.call('daemon.status');
    const s: Sample = {
      t: round((Date.now() - this.loadStartedAt) / 1000, 1),
      rssMB: rssMB(this.pid),
      rssAnonMB: rssAnonMB(this.pid),
      ...(this.guardianPid ? { guardianRssMB: rssMB(this.guardianPid) } : {}),
      fds: fdCount(this.pid),
      running: status.sessions.running,
      finished: status.sessions.finished,
      cpuPct: pct(cpu.self - this.lastCpu.self),
      cpuWithSessionsPct: pct(daemonAll),
      ...(this.guardianPid ? { guardianCpuPct: pct(guardianCpu - this.lastGuardianCpu) } : {}),
      soakCpuPct: pct(ownCpu - this.lastSoakCpu),
      totalCpuPct: pct(daemonAll + guardianCpu - this.lastGuardianCpu + ownCpu - this.lastSoakCpu),
      machineBusyPct: round((100 * (machine.busy - this.lastMachine.busy)) / Math.max(1, machine.total - this.lastMachine.total), 1),
      load1: Number(readFileSync('/proc/loadavg', 'latin1').split(' ')[0]),
      loop: this.loopStats(at),
      soakLoopP99Ms: round(this.soakLoop.percentile(99) / 1e6, 1),
    };
    this.soakLoop.reset();
    this.lastCpu = cpu;
    this.lastGuardianCpu = guardianCpu;
    this.lastSoakCpu = ownCpu;
    this.lastMachine = machine;
    this.lastAt = at;
    if (this.count++ % this.diagEvery === 0) Object.assign(s, await this.diagnostics());
    this.samples.push(s);
    return s;
  }

  /**
   * daemon.diagnostics: heap, loop resources and loop delay; with `objects`, live objects counted
   * after full garbage collections, which hold the daemon: asked for in the quiet figures only.
   */
  async diagnostics(objects = false): Promise<Partial<Sample>> {
    const t0 = wallNow();
    const d = await this.client.call('daemon.diagnostics', objects ? { objects: true } : {});
    const t1 = wallNow();
    this.diagWindows.push([t0, t1]);
    return {
      heapUsedMB: round(d.heapUsed / 1048576, 1),
      externalMB: round(d.external / 1048576, 1),
      objects: d.objects,
      resources: d.resources,
      diagMs: round(t1 - t0, 1),
      ...(d.eventLoopDelay !== undefined ? { daemonLoopDelay: d.eventLoopDelay } : {}),
    };
  }

  private loopStats(until: number): LoopStats {
    // Probes sent before the load began (held up by the quiet figures' diagnostics) do not count.
    const mine = this.readings.filter((r) => r.sentAt <= until && r.sentAt >= this.loadStartedWall);
    this.readings = this.readings.filter((r) => r.sentAt > until);
    const ms: number[] = [];
    const timed: [number, number][] = [];
    let errors = 0;
    for (const r of mine) {
      if (r.error !== undefined || r.ms === undefined) {
        errors++;
        continue;
      }
      const end = r.sentAt + r.ms;
      if (this.diagWindows.some(([a, b]) => r.sentAt <= b && end >= a)) {
        this.skippedProbes++;
        continue;
      }
      ms.push(r.ms);
      timed.push([round((r.sentAt - this.loadStartedWall) / 1000, 1), r.ms]);
    }
    this.diagWindows = this.diagWindows.filter(([, b]) => b > until - 60_000);
    this.allLoop.push(...timed);
    this.probeErrors += errors;
    const q = (p: number) => round(quantile(ms, p), 3);
    return { n: ms.length, p50: q(0.5), p99: q(0.99), max: ms.length ? round(Math.max(...ms), 3) : Number.NaN, errors };
  }

  private guardianCpu(): number {
    if (!this.guardianPid) return 0;
    try {
      return cpuOf(this.guardianPid).self;
    } catch {
      return this.lastGuardianCpu;
    }
  }

  stop(): void {
    this.soakLoop.disable();
  }
}
