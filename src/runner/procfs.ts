import { readFileSync, readlinkSync } from 'node:fs';

/** Parse `/proc/PID/stat`: the state letter and the process group. */
export function readStat(pid: number): { state: string; pgrp: number; ppid: number; startTime: number } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  // The command name may hold spaces and parentheses: the fields start after the last ')'.
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: rest[0], ppid: Number(rest[1]), pgrp: Number(rest[2]), startTime: Number(rest[19]) };
}

/**
 * A zombie's wait status (field 52 of /proc/PID/stat, Linux 3.5+) as code and signal: what its
 * parent will read. Undefined when the process is gone or is not a zombie.
 */
export function zombieStatus(pid: number): { code: number | null; signal: number | null } | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  const rest = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const status = Number(rest[49]);
  if (rest[0] !== 'Z' || !Number.isInteger(status)) return undefined;
  return (status & 0x7f) === 0 ? { code: (status >> 8) & 0xff, signal: null } : { code: null, signal: status & 0x7f };
}

/** What a process's fd points at (`pipe:[123]`, `socket:[456]`, `/dev/pts/3`), or undefined. */
export function fdTarget(pid: number, fd: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/fd/${fd}`);
  } catch {
    return undefined;
  }
}

/** The children of a single-threaded process (its main thread's), or [] when it is gone. */
export function childrenOf(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1').split(' ').filter(Boolean).map(Number);
  } catch {
    return [];
  }
}
