import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { childrenOf } from './procs.js';

/**
 * A state directory kept outside any daemon's temp dir, so daemons started one after another
 * share it (startDaemon's stop() removes only its own dir). Remove it with `removeStateDirs()`.
 */
const made = new Set<string>();

export function makeStateDir(prefix = 'procctl-state-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.add(dir);
  return join(dir, 'state');
}

export function removeStateDirs(): void {
  for (const dir of made) rmSync(dir, { recursive: true, force: true });
  made.clear();
}

export const sessionsDir = (stateDir: string) => join(stateDir, 'sessions');

/** Every parseable session record on disk, by session id: record files, then the journal of ended sessions (its word wins, later lines over earlier). */
export function readRecords(stateDir: string): Map<string, any> {
  const out = new Map<string, any>();
  for (const name of readdirSync(sessionsDir(stateDir))) {
    if (!name.endsWith('.json')) continue;
    try {
      const rec = JSON.parse(readFileSync(join(sessionsDir(stateDir), name), 'utf8'));
      out.set(rec.id, rec);
    } catch {
      // not a record
    }
  }
  for (const line of journalLines(stateDir)) {
    try {
      const rec = JSON.parse(line);
      if (typeof rec.forget === 'string') out.delete(rec.forget);
      else out.set(rec.id, rec);
    } catch {
      // a torn line
    }
  }
  return out;
}

/** The lines of the journal of ended sessions (`sessions/ended.jsonl`), or none. */
export function journalLines(stateDir: string): string[] {
  try {
    return readFileSync(join(sessionsDir(stateDir), 'ended.jsonl'), 'utf8').split('\n').filter(Boolean);
  } catch {
    return [];
  }
}

/**
 * The files a session has in the state dir (record, spool, rotated spool, a record being written),
 * with their sizes. A file renamed or removed between the listing and its stat is left out.
 */
export function sessionFiles(stateDir: string, id: string): { name: string; size: number }[] {
  return readdirSync(sessionsDir(stateDir))
    .filter((n) => n.startsWith(`${id}.`))
    .flatMap((name) => {
      const st = statSync(join(sessionsDir(stateDir), name), { throwIfNoEntry: false });
      return st ? [{ name, size: st.size }] : [];
    });
}

/** Field 22 of /proc/PID/stat: the start time in clock ticks since boot. */
export function startTimeOf(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19]);
  } catch {
    return undefined;
  }
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    const state = stat.slice(stat.lastIndexOf(')') + 2)[0];
    return state === 'Z' || state === 'X';
  } catch {
    return true;
  }
}

/**
 * Live processes (that we can read) carrying `PROCCTL_SESSION_ID=<id>` of one of these sessions
 * in their environment: whatever a session started, inside its group or not.
 */
export function markedProcesses(ids: Iterable<string>): { pid: number; id: string }[] {
  const wanted = new Set(ids);
  const out: { pid: number; id: string }[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let env: string;
    try {
      env = readFileSync(`/proc/${entry}/environ`, 'latin1');
    } catch {
      continue;
    }
    for (const v of env.split('\0')) {
      if (!v.startsWith('PROCCTL_SESSION_ID=')) continue;
      const id = v.slice('PROCCTL_SESSION_ID='.length);
      if (wanted.has(id) && !isZombie(Number(entry))) out.push({ pid: Number(entry), id });
    }
  }
  return out;
}

export function cmdline(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ');
  } catch {
    return '';
  }
}

/** The daemon's guardian: its child running guardian.js. */
export function guardianOf(daemonPid: number): number | undefined {
  return childrenOf(daemonPid).find((pid) => cmdline(pid).includes('guardian.js'));
}

/** Pino JSON lines of a daemon's stdout (other lines skipped). */
export function logLines(stdout: string): any[] {
  const out: any[] = [];
  for (const line of stdout.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      out.push(JSON.parse(line));
    } catch {
      // a partial line
    }
  }
  return out;
}

/** Process ids from `p=<pid>` lines a command printed. */
export function printedPids(output: string): number[] {
  return [...output.matchAll(/^p=(\d+)$/gm)].map((m) => Number(m[1]));
}
