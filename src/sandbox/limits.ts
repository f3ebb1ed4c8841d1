import { constants } from 'node:os';
import type { Config } from '../config/schema.js';
import type { FailReason } from '../session/types.js';

export type Limits = Config['limits'];
export type Resource = 'cpu' | 'as' | 'nofile' | 'nproc' | 'fsize';
export type Rlimit = [resource: Resource, soft: number, hard: number];

/**
 * Seconds of CPU past the soft limit before the kernel's SIGKILL. With soft = hard the kernel
 * sends SIGKILL at once and the job's end could not name the limit; one second later it gets
 * SIGXCPU first (and a job that handles it has a second to wrap up).
 */
const CPU_HARD_MARGIN_S = 1;

/** The rlimits of SPEC §12 for a non-elevated session; empty when none is configured. */
export function rlimits(limits: Limits): Rlimit[] {
  const out: Rlimit[] = [];
  if (limits.cpuSeconds !== undefined) out.push(['cpu', limits.cpuSeconds, limits.cpuSeconds + CPU_HARD_MARGIN_S]);
  if (limits.memoryBytes !== undefined) out.push(['as', limits.memoryBytes, limits.memoryBytes]);
  if (limits.openFiles !== undefined) out.push(['nofile', limits.openFiles, limits.openFiles]);
  if (limits.processes !== undefined) out.push(['nproc', limits.processes, limits.processes]);
  if (limits.fileSizeBytes !== undefined) out.push(['fsize', limits.fileSizeBytes, limits.fileSizeBytes]);
  return out;
}

/** The same limits as options of util-linux's prlimit(1), for spawners that cannot set them. */
export function prlimitOptions(list: readonly Rlimit[]): string[] {
  return list.map(([resource, soft, hard]) => `--${resource}=${soft}:${hard}`);
}

/**
 * Why a session ended, when a limit ended it and the kernel says so: SIGXCPU for the CPU limit,
 * SIGXFSZ for the file size limit, on the job itself or, as a shell reports it, as exit status
 * 128+N from a shell whose command it killed. (Memory, open files and processes make a call fail
 * instead: the job sees ENOMEM, EMFILE or EAGAIN and ends as it chooses.)
 */
export function limitReason(end: { signal: string | null; exitCode: number | null }, list: readonly Rlimit[]): FailReason | undefined {
  const hit = (name: 'SIGXCPU' | 'SIGXFSZ') => end.signal === name || end.exitCode === 128 + constants.signals[name];
  if (hit('SIGXCPU') && list.some(([r]) => r === 'cpu')) return 'cpu_limit';
  if (hit('SIGXFSZ') && list.some(([r]) => r === 'fsize')) return 'file_size_limit';
  return undefined;
}
