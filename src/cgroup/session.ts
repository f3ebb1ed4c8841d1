import { existsSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { closeQuietly } from '../base/close-quietly.js';
import { keyed, makeDir, readFile, readKeyed, readOpen, readNumber, readPids, removeDir, removeDirLater, rssBytes, writeFile, type ReadText } from './files.js';
import { membershipDir, type CgroupLayout, type V1Name } from './host.js';
import type { SessionLimits } from '../base/session-limits.js';

/** A session's cgroup is named this and its id, in each hierarchy the daemon uses. */
export const SESSION_CGROUP_PREFIX = 's-';

export type { SessionLimits };

/** What a session used (SPEC §15): read when asked (the sample then held a second, runner/usage.ts) and once at its end. */
export interface Resources {
  cpuMs: number;
  memoryBytes: number;
  memoryPeakBytes: number;
  processes: number;
}

/** Two samples with the same figures. */
export const sameResources = (a: Resources, b: Resources): boolean =>
  a.cpuMs === b.cpuMs && a.memoryBytes === b.memoryBytes && a.memoryPeakBytes === b.memoryPeakBytes && a.processes === b.processes;

/** fromReading's figures before it knows whether they are new (one object, reused). */
const scratch: Resources = { cpuMs: 0, memoryBytes: 0, memoryPeakBytes: 0, processes: 0 };

/** The files a session's usage is read from (SessionCgroup.usagePlan): paths only, so a thread that has no session can read them. */
export interface UsagePlan {
  /** The directory whose cgroup.procs lists the session's processes. */
  members: string;
  /** v2 cpu.stat (usage_usec), where v2 counts CPU time. */
  cpuStat?: string;
  /** v1 cpuacct.usage (ns), read where cpu.stat says nothing. */
  cpuacctUsage?: string;
  /** The memory controller's files, when the session has one. */
  memory?: { current: string; peak: string };
  /** The pids controller's files, when the session has one. */
  pids?: { current: string; peak: string };
}

/** What one read of a UsagePlan found: the kernel's figures as they are, before a session's own peaks are kept (SessionCgroup.fromReading). */
export interface UsageReading {
  cpuMs: number;
  memoryBytes: number;
  /** The memory controller's peak; undefined where memory is sampled from the members. */
  memoryPeakBytes?: number;
  /** The pids controller's count; undefined where none counts. */
  processes?: number;
  /** The members counted, where no controller counts them and the session runs. */
  counted?: number;
}

/**
 * Read what a session uses now from its plan's files (the reads SessionCgroup.resources makes;
 * the sampling thread makes them for the daemon's periodic refresh, through descriptors it keeps:
 * `read`). `final`: at the session's end, the most processes it had at once where the kernel
 * keeps that, and no members' memory.
 */
export function readUsage(plan: UsagePlan, final = false, read: ReadText = readFile): UsageReading {
  let cpuMs = 0;
  const usage = plan.cpuStat === undefined ? undefined : readKeyed(plan.cpuStat, read)?.get('usage_usec');
  if (usage !== undefined) cpuMs = usage / 1000;
  else {
    const ns = plan.cpuacctUsage === undefined ? undefined : readNumber(plan.cpuacctUsage, read);
    if (ns !== undefined) cpuMs = ns / 1e6;
  }
  const r: UsageReading = { cpuMs: Math.round(cpuMs), memoryBytes: 0 };
  let members: number[] | undefined;
  if (plan.memory) {
    r.memoryBytes = readNumber(plan.memory.current, read) ?? 0;
    r.memoryPeakBytes = readNumber(plan.memory.peak, read) ?? r.memoryBytes;
  } else if (!final) for (const pid of (members ??= readPids(plan.members, read))) r.memoryBytes += rssBytes(pid, read);
  if (plan.pids) r.processes = (final ? readNumber(plan.pids.peak, read) : undefined) ?? readNumber(plan.pids.current, read);
  if (r.processes === undefined && !final) r.counted = (members ??= readPids(plan.members, read)).length;
  return r;
}

/** Why a limit ended a session, from the kernel's own counters. */
export type LimitHit = 'memory_limit' | 'process_limit';

/** The CFS period cpu.max and cpu.cfs_period_us are written with: 100 ms, as systemd uses. */
const CPU_PERIOD_US = 100_000;

/**
 * Whether a session joins v1 hierarchy `n`. Each join is a migration the job's first process
 * makes before it runs, and each hierarchy a directory made, read and removed: tens of
 * microseconds each, on every exec. So with v2 membership a session joins a v1 hierarchy only
 * for what v2 cannot give it: memory, pids and cpu for their limits (v2 counts processes and CPU
 * time by itself, and memory is sampled from /proc where no limit asks for the controller), the
 * freezer only where v2 cannot freeze. Without v2 it joins every v1 hierarchy in use.
 */
function needsV1(layout: CgroupLayout, n: V1Name, limits: SessionLimits): boolean {
  if (!layout.v2) return true;
  switch (n) {
    case 'memory':
      return limits.memoryBytes !== undefined;
    case 'pids':
      return limits.processes !== undefined;
    case 'cpu':
    case 'cpuacct':
      return limits.cpuPercent !== undefined || !layout.v2CpuStat;
    case 'freezer':
      return layout.freeze === 'v1';
  }
}

/**
 * A session's cgroup: one v2 directory (membership, kill, freeze, and the controllers v2 gives
 * here) and a directory in each v1 hierarchy in use. Made before the job starts; the job's first
 * process writes itself into every `joinFiles` entry before it runs anything (native/spawn.c, or
 * the wrapper of cgroup/join.ts), so everything it ever starts is here.
 */
export class SessionCgroup {
  /** The most memory seen where it is sampled (no memory controller for this session). */
  private sampledPeak = 0;
  /** The most processes seen at once where no pids controller counts them (the leader at least). */
  private sampledProcesses = 1;

  private constructor(
    private readonly layout: CgroupLayout,
    /** v2 directory, when v2 is in use. */
    readonly v2: string | undefined,
    /** v1 directories by hierarchy. */
    readonly v1: Partial<Record<V1Name, string>>,
  ) {}

  /**
   * Make the session's cgroup and set its limits (session ids are new, and the next start empties
   * what a crashed run left, so the names are free). Throws with what failed; then nothing is left made.
   */
  static create(layout: CgroupLayout, sessionId: string, limits: SessionLimits): SessionCgroup {
    const name = `${SESSION_CGROUP_PREFIX}${sessionId}`;
    const v2 = SessionCgroup.v2Dir(layout, sessionId);
    const v1: Partial<Record<V1Name, string>> = {};
    for (const [n, dir] of Object.entries(layout.v1) as [V1Name, string][]) if (needsV1(layout, n, limits)) v1[n] = join(dir, name);
    const cg = new SessionCgroup(layout, v2, v1);
    try {
      for (const dir of cg.dirs()) makeDir(dir);
      cg.setLimits(limits);
    } catch (err) {
      cg.remove();
      throw new Error(`cannot make the session's cgroup: ${(err as Error).message}`);
    }
    return cg;
  }

  /**
   * Whether a session with these limits lives in its v2 directory alone (it joins no v1
   * hierarchy): the kind of cgroup that can be made before its session is asked for (cgroup/ahead.ts).
   */
  static v2Only(layout: CgroupLayout, limits: SessionLimits): boolean {
    return layout.v2 !== undefined && (Object.keys(layout.v1) as V1Name[]).every((n) => !needsV1(layout, n, limits));
  }

  /** The v2 directory a session of this id has (made ahead by cgroup/ahead.ts, or by create). */
  static v2Dir(layout: CgroupLayout, sessionId: string): string | undefined {
    return layout.v2 ? join(layout.v2, `${SESSION_CGROUP_PREFIX}${sessionId}`) : undefined;
  }

  /**
   * A session's cgroup whose v2 directory was made ahead (v2Only limits), its limits set now.
   * Throws with what failed; then the directory is removed.
   */
  static madeAhead(layout: CgroupLayout, sessionId: string, limits: SessionLimits): SessionCgroup {
    const cg = new SessionCgroup(layout, SessionCgroup.v2Dir(layout, sessionId), {});
    try {
      cg.setLimits(limits);
    } catch (err) {
      cg.remove();
      throw new Error(`cannot set the session's cgroup limits: ${(err as Error).message}`);
    }
    return cg;
  }

  /**
   * The cgroup the last image made for a session it handed over (SPEC §19): its directories and
   * limits are as they were; only those that still exist are taken.
   */
  static adopt(layout: CgroupLayout, dirs: { v2?: string; v1: Partial<Record<V1Name, string>> }): SessionCgroup {
    const v1: Partial<Record<V1Name, string>> = {};
    for (const [n, dir] of Object.entries(dirs.v1) as [V1Name, string][]) if (existsSync(dir)) v1[n] = dir;
    return new SessionCgroup(layout, dirs.v2 !== undefined && existsSync(dirs.v2) ? dirs.v2 : undefined, v1);
  }

  /** Every directory of the session, v2 first; one per hierarchy (cpu and cpuacct may share one). */
  dirs(): string[] {
    return [...new Set([...(this.v2 ? [this.v2] : []), ...Object.values(this.v1)])];
  }

  /** The cgroup.procs files the job's first process writes "0" (itself) into before it execs. */
  get joinFiles(): string[] {
    return this.dirs().map((d) => join(d, 'cgroup.procs'));
  }

  /** The directory whose cgroup.procs says who is in the session. */
  private get members_(): string {
    return this.v2 ?? membershipDir({ v1: this.v1 })!;
  }

  /** Every process of the session now, wherever it went (setsid, double fork). */
  members(): number[] {
    return readPids(this.members_);
  }

  /** Anything of the session still alive (v2: `populated` in cgroup.events; zombies do not count). */
  populated(): boolean {
    if (this.v2) {
      const events = keyed(this.events === undefined ? readFile(join(this.v2, 'cgroup.events')) : readOpen(this.events));
      return events === undefined ? false : events.get('populated') === 1;
    }
    return this.members().length > 0;
  }

  /** v2's cgroup.events, held open while the session runs (holdEvents): read once at the leader's exit, not opened and closed again there. */
  private events: number | undefined;

  /**
   * Hold cgroup.events open until `releaseEvents`: opened once the job has started (the daemon
   * waits for nothing then), so the read that decides whether anything is left when the leader
   * exits is one system call on the way to the exec's answer, not three (docs/benchmarks.md).
   */
  holdEvents(): void {
    if (this.events !== undefined || !this.v2) return;
    try {
      this.events = openSync(join(this.v2, 'cgroup.events'), 'r');
    } catch {
      // Read by its path then.
    }
  }

  releaseEvents(): void {
    if (this.events === undefined) return;
    closeQuietly(this.events);
    this.events = undefined;
  }

  /**
   * SIGKILL every process of the session at once: one write to cgroup.kill, or where the kernel
   * has none, freeze (so nothing forks meanwhile), SIGKILL each member, thaw. Call until `populated()` is false.
   */
  kill(): void {
    if (this.v2 && this.layout.v2Kill) {
      try {
        writeFile(join(this.v2, 'cgroup.kill'), '1');
        return;
      } catch {
        // gone already, or refused: fall through to one by one
      }
    }
    const frozen = this.freeze();
    for (const pid of this.members()) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (frozen) this.thaw();
  }

  /** Freeze the whole session (pause): true when the write was taken. It is frozen once `frozen()` says so. */
  freeze(): boolean {
    return this.setFrozen(true);
  }

  thaw(): boolean {
    return this.setFrozen(false);
  }

  private setFrozen(on: boolean): boolean {
    try {
      if (this.layout.freeze === 'v2' && this.v2) writeFile(join(this.v2, 'cgroup.freeze'), on ? '1' : '0');
      else if (this.layout.freeze === 'v1' && this.v1.freezer) writeFile(join(this.v1.freezer, 'freezer.state'), on ? 'FROZEN' : 'THAWED');
      else return false;
      return true;
    } catch {
      return false;
    }
  }

  /** Every process of the session is frozen. */
  frozen(): boolean {
    if (this.layout.freeze === 'v2' && this.v2) return readKeyed(join(this.v2, 'cgroup.events'))?.get('frozen') === 1;
    if (this.layout.freeze === 'v1' && this.v1.freezer) return readFile(join(this.v1.freezer, 'freezer.state'))?.trim() === 'FROZEN';
    return false;
  }

  /** The directory a controller's files are in for this session, when the host gives it. */
  private dirFor(c: 'memory' | 'pids' | 'cpu'): { dir: string; v2: boolean } | undefined {
    const from = this.layout.controllers[c];
    if (from === 'v2' && this.v2) return { dir: this.v2, v2: true };
    const dir = this.v1[c];
    return from === 'v1' && dir ? { dir, v2: false } : undefined;
  }

  private setLimits(l: SessionLimits): void {
    const need = (c: 'memory' | 'pids' | 'cpu') => {
      const at = this.dirFor(c);
      if (!at) throw new Error(`this host gives no ${c} controller to the daemon`);
      return at;
    };
    if (l.memoryBytes !== undefined) {
      const { dir, v2 } = need('memory');
      if (v2) {
        writeFile(join(dir, 'memory.max'), String(l.memoryBytes));
        // No swap: the limit is on memory, and a job over it is stopped rather than pushed to disk.
        if (existsSync(join(dir, 'memory.swap.max'))) writeFile(join(dir, 'memory.swap.max'), '0');
      } else {
        writeFile(join(dir, 'memory.limit_in_bytes'), String(l.memoryBytes));
        if (existsSync(join(dir, 'memory.memsw.limit_in_bytes'))) writeFile(join(dir, 'memory.memsw.limit_in_bytes'), String(l.memoryBytes));
        else writeFile(join(dir, 'memory.swappiness'), '0');
      }
    }
    if (l.processes !== undefined) writeFile(join(need('pids').dir, 'pids.max'), String(l.processes));
    if (l.cpuPercent !== undefined) {
      const { dir, v2 } = need('cpu');
      const quota = Math.max(1000, Math.round((l.cpuPercent / 100) * CPU_PERIOD_US));
      if (v2) writeFile(join(dir, 'cpu.max'), `${quota} ${CPU_PERIOD_US}`);
      else {
        writeFile(join(dir, 'cpu.cfs_period_us'), String(CPU_PERIOD_US));
        writeFile(join(dir, 'cpu.cfs_quota_us'), String(quota));
      }
    }
  }

  /** Which limit the kernel enforced on the session, if any: an OOM kill, or a fork refused at pids.max. */
  limitHit(): LimitHit | undefined {
    const mem = this.dirFor('memory');
    if (mem) {
      const events = readKeyed(join(mem.dir, mem.v2 ? 'memory.events' : 'memory.oom_control'));
      if ((events?.get('oom_kill') ?? 0) > 0) return 'memory_limit';
    }
    const pids = this.dirFor('pids');
    if (pids && (readKeyed(join(pids.dir, 'pids.events'))?.get('max') ?? 0) > 0) return 'process_limit';
    return undefined;
  }

  /**
   * What the session used so far, from the kernel's counters (a few small reads). `processes` is
   * how many tasks it has now; at its end (`final`) the most it had at once, where the kernel
   * keeps that (pids.peak), since none are left then. Without a memory controller for the
   * session, memory is sampled: the members' resident memory now, and as its peak the most seen
   * by any sample or `exitPeakBytes` (the largest single process the leader's wait reported).
   */
  resources(final = false, exitPeakBytes = 0): Resources {
    return this.fromReading(readUsage(this.usagePlan(), final), final, exitPeakBytes);
  }

  private plan: UsagePlan | undefined;

  /** Which files say what the session uses: plain paths, which another thread can read (readUsage). */
  usagePlan(): UsagePlan {
    if (this.plan) return this.plan;
    const plan: UsagePlan = { members: this.members_ };
    if (this.v2) plan.cpuStat = join(this.v2, 'cpu.stat');
    const acct = this.v1.cpuacct ?? this.v1.cpu;
    if (acct) plan.cpuacctUsage = join(acct, 'cpuacct.usage');
    const mem = this.dirFor('memory');
    if (mem) plan.memory = { current: join(mem.dir, mem.v2 ? 'memory.current' : 'memory.usage_in_bytes'), peak: join(mem.dir, mem.v2 ? 'memory.peak' : 'memory.max_usage_in_bytes') };
    const pids = this.dirFor('pids');
    if (pids) plan.pids = { current: join(pids.dir, 'pids.current'), peak: join(pids.dir, 'pids.peak') };
    return (this.plan = plan);
  }

  /**
   * The figures from what readUsage read (here, or on the sampling thread): what the session's
   * samples keep across reads (the most memory and processes seen where no controller keeps them)
   * is kept here, on the thread that owns the session. `held`: the sample held now, answered
   * itself when the figures are its own.
   */
  fromReading(r: UsageReading, final = false, exitPeakBytes = 0, held?: Resources): Resources {
    let memoryPeakBytes = r.memoryPeakBytes;
    if (memoryPeakBytes === undefined) {
      this.sampledPeak = Math.max(this.sampledPeak, r.memoryBytes, exitPeakBytes);
      memoryPeakBytes = this.sampledPeak;
    }
    let processes = r.processes;
    if (processes === undefined && final) processes = this.sampledProcesses;
    else if (processes === undefined) {
      // Counted from the members while it runs; at the end, the most any look saw (the leader at least).
      processes = r.counted ?? 0;
      this.sampledProcesses = Math.max(this.sampledProcesses, processes);
    }
    scratch.cpuMs = r.cpuMs;
    scratch.memoryBytes = r.memoryBytes;
    scratch.memoryPeakBytes = memoryPeakBytes;
    scratch.processes = processes;
    // The figures did not move: the sample held is kept, and nothing is made (a thousand quiet sessions a refresh).
    return held && sameResources(held, scratch) ? held : { ...scratch };
  }

  /** Remove the session's directories (each must be empty): true when all are gone. */
  remove(): boolean {
    let all = true;
    for (const dir of this.dirs().reverse()) if (!removeDir(dir)) all = false;
    return all;
  }

  /** `remove` off the event loop, every directory at once. */
  async removeLater(): Promise<boolean> {
    const gone = await Promise.all(this.dirs().map(removeDirLater));
    return !gone.includes(false);
  }
}
