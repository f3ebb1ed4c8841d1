import { readFileSync } from 'node:fs';

/** One slot of the guardian's table: a line of this many bytes, blank when free. */
export const SLOT_BYTES = 64;

/**
 * A running session as the guardian knows it: its process group, and either its leader's start
 * time (exact, once the daemon has read it) or when it was spawned (wall clock, ms).
 */
export interface GuardedSession {
  id: string;
  pgid: number;
  startTime?: number;
  spawnedAt?: number;
}

/** The slot's text: `id pgid startTime|- spawnedAt|-`, padded to SLOT_BYTES; a free slot is blank. */
export function slotLine(s: GuardedSession | undefined): string {
  const text = s ? `${s.id} ${s.pgid} ${s.startTime ?? '-'} ${s.spawnedAt ?? '-'}` : '';
  return `${text.padEnd(SLOT_BYTES - 1)}\n`;
}

/** The sessions in a table's text; blank and unreadable slots are skipped. */
export function readSlots(text: string): GuardedSession[] {
  const out: GuardedSession[] = [];
  for (let at = 0; at + SLOT_BYTES <= text.length; at += SLOT_BYTES) {
    const [id, pgid, startTime, spawnedAt] = text.slice(at, at + SLOT_BYTES).trim().split(' ');
    if (!id || !(Number(pgid) > 0)) continue;
    out.push({
      id,
      pgid: Number(pgid),
      ...(startTime && startTime !== '-' ? { startTime: Number(startTime) } : {}),
      ...(spawnedAt && spawnedAt !== '-' ? { spawnedAt: Number(spawnedAt) } : {}),
    });
  }
  return out;
}

/** Clock ticks per second of /proc's start times (USER_HZ: 100 on every Linux architecture Node runs on). */
const USER_HZ = 100;

/**
 * Did a process that started at `startTime` (ticks since boot) start within `slackMs` of
 * `spawnedAt` (wall clock)? For a session younger than its first record, whose leader's exact
 * start time the daemon has not read: a reused PID would have started well after.
 */
export function startedNear(startTime: number, spawnedAt: number, slackMs = 2000, stat = () => readFileSync('/proc/stat', 'latin1')): boolean {
  const btime = Number(/^btime (\d+)$/m.exec(stat())?.[1]);
  if (!Number.isFinite(btime)) return false;
  const startedMs = btime * 1000 + (startTime * 1000) / USER_HZ;
  return Math.abs(startedMs - spawnedAt) <= slackMs;
}
