import { readStat as readProcStat } from '../../src/runner/procfs.js';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/** A few fields of /proc/PID/status in kB; undefined once the process is gone. */
export function memoryKb(pid: number): { rss: number; hwm: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/status`, 'latin1');
  } catch {
    return undefined;
  }
  const field = (name: string) => Number(new RegExp(`^${name}:\\s+(\\d+)`, 'm').exec(text)?.[1] ?? Number.NaN);
  return { rss: field('VmRSS'), hwm: field('VmHWM') };
}

/** Reset the peak-RSS mark (VmHWM) of a process we own, so the next read is the peak since now. */
export function resetPeakRss(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

type Stat = NonNullable<ReturnType<typeof readProcStat>> & { pid: number };

/** The daemon's own /proc reader, with the pid attached. */
function readStat(pid: number): Stat | undefined {
  const stat = readProcStat(pid);
  return stat && { pid, ...stat };
}

/** True while a process with this pid exists and is not a zombie. */
export function alive(pid: number): boolean {
  const s = readStat(pid);
  return s !== undefined && s.state !== 'Z' && s.state !== 'X';
}

/** Every live process (not a zombie) whose process group or parent is in the given sets. */
export function liveProcesses(filter: { pgrps?: ReadonlySet<number>; ppids?: ReadonlySet<number> }): Stat[] {
  const out: Stat[] = [];
  for (const entry of readdirSync('/proc')) {
    const c = entry.charCodeAt(0);
    if (c < 48 || c > 57) continue;
    const s = readStat(Number(entry));
    if (!s || s.state === 'Z' || s.state === 'X') continue;
    if (filter.pgrps?.has(s.pgrp) || filter.ppids?.has(s.ppid)) out.push(s);
  }
  return out;
}

/** Machine facts for the report. */
export function machine() {
  const cpuinfo = readFileSync('/proc/cpuinfo', 'latin1');
  const meminfo = readFileSync('/proc/meminfo', 'latin1');
  const memKb = Number(/^MemTotal:\s+(\d+)/m.exec(meminfo)?.[1] ?? 0);
  return {
    cpus: (cpuinfo.match(/^processor\s*:/gm) ?? []).length,
    model: /^model name\s*:\s*(.*)$/m.exec(cpuinfo)?.[1]?.trim() ?? 'unknown',
    memGiB: Math.round((memKb / 1024 / 1024) * 10) / 10,
    kernel: readFileSync('/proc/sys/kernel/osrelease', 'latin1').trim(),
    node: process.version,
    loadavg: loadAvg(),
    pageTouchUs: pageTouchUs(),
  };
}

/** The load average, as `uptime` prints it (1, 5 and 15 minutes). */
export function loadAvg(): string {
  return readFileSync('/proc/loadavg', 'latin1').split(' ').slice(0, 3).join(' ');
}

/**
 * What the first write to a fresh page of memory costs here, in µs: the kernel's fault and
 * zeroing, and on a VM whose host takes free pages back (free page reporting, a balloon) the
 * host's fault too (measured at 0.1-0.3 µs on bare metal, 23 µs on this VM on a day its host
 * reclaimed). Every figure that makes new memory (a process started, a reader allocating per
 * read) moves with it, so the bench prints it beside the machine.
 */
function pageTouchUs(): number {
  const size = 64 * 1024 * 1024;
  const buf = Buffer.allocUnsafeSlow(size);
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < size; i += 4096) buf[i] = 1;
  const us = Number(process.hrtime.bigint() - t0) / 1000;
  return Math.round((us / (size / 4096)) * 100) / 100;
}

/** CPU time (user + system) a process has used so far, in ms; clock-tick resolution. */
export function cpuMs(pid: number): number {
  return statCpuMs(`/proc/${pid}/stat`);
}

/** CPU time of one thread of a process (its main thread when `tid` is the pid): the event loop's share. */
export function threadCpuMs(pid: number, tid = pid): number {
  return statCpuMs(`/proc/${pid}/task/${tid}/stat`);
}

function statCpuMs(file: string): number {
  const text = readFileSync(file, 'latin1');
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // Fields 14 and 15 of stat (utime, stime) are rest[11], rest[12]; ticks are 1/100 s on Linux.
  return (Number(rest[11]) + Number(rest[12])) * 10;
}
