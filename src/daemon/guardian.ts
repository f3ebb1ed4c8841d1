/**
 * The guardian: a small process the daemon starts at boot and feeds, over a pipe, the process
 * group of every running session (it reads the leader's start time itself). When the pipe closes without a goodbye — the
 * daemon died, even by SIGKILL — it kills every recorded group and every process carrying a
 * recorded session's marker, then exits. Nothing a dead daemon started is left running.
 */
import { readStat } from '../runner/procfs.js';
import { findSessionProcesses } from '../runner/sweep.js';

interface Record {
  pgid: number;
  startTime: number;
}

const sessions = new Map<string, Record>();
let goodbye = false;

function killAll(): void {
  for (const { pgid, startTime } of sessions.values()) {
    // Only a group whose leader is still the process we recorded: a reused PID is never hit.
    const leader = readStat(pgid);
    if (leader && leader.startTime === startTime) {
      try {
        process.kill(-pgid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
  for (const list of findSessionProcesses(new Set(sessions.keys())).values()) {
    for (const { pid } of list) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

function onLine(line: string): void {
  if (!line) return;
  const msg = JSON.parse(line) as { op: string; id?: string; pgid?: number; startTime?: number };
  // The start time is read here, off the daemon's thread: reading a process's stat while it is still
  // being exec'd waits for it (a quarter of a millisecond, per exec, in the daemon).
  if (msg.op === 'add' && msg.id && msg.pgid) sessions.set(msg.id, { pgid: msg.pgid, startTime: msg.startTime ?? readStat(msg.pgid)?.startTime ?? -1 });
  else if (msg.op === 'remove' && msg.id) sessions.delete(msg.id);
  else if (msg.op === 'bye') goodbye = true;
}

// Signals reach the guardian only through the daemon's bridge: the daemon handles them, and the
// pipe closing is what tells the guardian to act.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const) process.on(signal, () => undefined);

let buffered = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  buffered += chunk;
  for (let nl = buffered.indexOf('\n'); nl !== -1; nl = buffered.indexOf('\n')) {
    try {
      onLine(buffered.slice(0, nl));
    } catch {
      // a torn line from a dying daemon: ignore it
    }
    buffered = buffered.slice(nl + 1);
  }
});
process.stdin.on('end', () => {
  if (!goodbye) killAll();
  process.exit(0);
});
process.stdin.on('error', () => {
  killAll();
  process.exit(0);
});
