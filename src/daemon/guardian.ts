/**
 * The guardian: a small process the daemon starts at boot. The daemon keeps in a table they
 * share (fd 3, guardian-slots.ts) the process group of every running session; the guardian
 * reads it only when its stdin closes without a goodbye — the daemon died, even by SIGKILL —
 * and then kills every recorded group whose leader is still the process that was recorded, and
 * every process carrying a recorded session's marker, and exits. Nothing a dead daemon started
 * is left running, and while the daemon lives the guardian sleeps: telling it of a session
 * wakes nobody. With durability.onCrash "keep" it also holds copies of running sessions'
 * descriptors (fd 4, guardian-keep.ts), and when the daemon dies it first waits crashGraceMs for
 * the next daemon to take them, killing only what it could not keep (docs/durability.md). Once it
 * has killed them all, it removes their cgroups and the daemon's own subtrees, as the daemon's
 * clean stop would have: a crashed daemon leaves no empty cgroup behind.
 */
import { fstatSync, readdirSync, readFileSync, readSync } from 'node:fs';
import { join } from 'node:path';
import { removeDir } from '../cgroup/files.js';
import { killAndRemove, killDirs } from '../cgroup/recover.js';
import { SESSION_CGROUP_PREFIX } from '../cgroup/session.js';
import { readStat } from '../runner/procfs.js';
import { findSessionProcesses } from '../runner/sweep.js';
import { KeptDescriptors } from './guardian-keep.js';
import { readSlots, startedNear, type GuardedSession } from './guardian-slots.js';

const TABLE_FD = 3;
/** Where the daemon sends the descriptors of sessions to keep through a crash (durability.onCrash "keep"). */
const KEEP_FD = 4;
/** How often the kept descriptors are taken from the queue, and those of ended sessions let go. */
const DRAIN_EVERY_MS = 1000;
/** What GuardianLink.start says (guardian-link.ts): the crash policy, and what to remove once everything is killed. */
interface Settings {
  onCrash: 'keep' | 'kill';
  crashGraceMs: number;
  socket: string;
  /** The cgroup subtrees the daemon made (or took from a run before), removed when empty; its state directory's lock. */
  made?: string[];
  lock?: string;
  /** The daemon that started it: its pid and start time (as its state directory's lock records them). */
  daemon?: { pid: number; startTime?: number };
}
const settings = ((): Settings => {
  try {
    return JSON.parse(process.env.PROCCTL_GUARDIAN ?? '') as Settings;
  } catch {
    return { onCrash: 'kill', crashGraceMs: 0, socket: '' };
  }
})();
/**
 * The daemon that started this guardian (a planned restart's next image is the same process), as
 * it named itself: not this process's parent at load, which after a crash before the load is the
 * daemon's own parent or a subreaper. Its parent only from a daemon too old to say.
 */
const DAEMON = settings.daemon?.pid ?? process.ppid;
/** And its start time (as its state directory's lock records it): a new daemon given the same pid is not it. */
const DAEMON_START = settings.daemon ? settings.daemon.startTime : readStat(DAEMON)?.startTime;
/** How long the cgroups of killed sessions are waited for to empty before they are left as they are. */
const TIDY_MS = 5000;
/** Where the daemon makes sessions' cgroups (argv, from GuardianLink.start). */
const CGROUP_ROOTS = process.argv.slice(2);

function readTable(): string {
  try {
    const buf = Buffer.alloc(fstatSync(TABLE_FD).size);
    let at = 0;
    while (at < buf.length) {
      const n = readSync(TABLE_FD, buf, at, buf.length - at, at);
      if (n === 0) break;
      at += n;
    }
    return buf.subarray(0, at).toString('latin1');
  } catch {
    return '';
  }
}

function killAll(): true {
  killSessions(readSlots(readTable()), true);
  return true;
}

/**
 * After killAll: each session cgroup goes once its processes have (children first: a cgroup a job
 * made below its own), then each subtree the daemon made, when empty, unless a new daemon holds the
 * state directory by now (it uses the same subtrees, named after that directory).
 */
async function tidyCgroups(): Promise<void> {
  const sessions = CGROUP_ROOTS.flatMap((root) => {
    try {
      return readdirSync(root)
        .filter((n) => n.startsWith(SESSION_CGROUP_PREFIX))
        .map((n) => join(root, n));
    } catch {
      return [];
    }
  });
  const stuck = await killAndRemove(sessions, TIDY_MS);
  if (stuck.length > 0) process.stderr.write(`procctl guardian: these session cgroups did not empty within ${TIDY_MS} ms and are left: ${stuck.join(', ')}\n`);
  const left: string[] = [];
  for (const dir of [...(settings.made ?? [])].reverse()) {
    // Asked again before each: a new daemon may take the directory (and these subtrees) meanwhile.
    if (!stateDirFree()) return;
    if (!removeDir(dir)) left.push(dir);
  }
  if (left.length > 0) process.stderr.write(`procctl guardian: these cgroup subtrees of the daemon could not be removed (not empty, or not ours to remove) and are left: ${left.join(', ')}\n`);
}

/** How long a daemon whose descriptors closed is given to become a zombie (or gone) before it is taken to run on. */
const EXIT_WAIT_MS = 2000;

/**
 * Whether the process that started this guardian still runs: the same pid and start time, and
 * neither a zombie nor gone. A planned restart's next image is that process too; a daemon that
 * died closed its descriptors (this guardian's pipe) on its way out, so its end is waited for a moment.
 */
async function daemonRunsOn(): Promise<boolean> {
  const until = Date.now() + EXIT_WAIT_MS;
  for (;;) {
    const st = readStat(DAEMON);
    if (!st || st.startTime !== DAEMON_START || st.state === 'Z' || st.state === 'X') return false;
    if (Date.now() >= until) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/**
 * Whether no live daemon holds the state directory: its lock (daemon/state.ts) is gone, or names
 * the daemon that died (its pid and start time), or a process that is gone. A lock being written (unreadable) is a daemon's.
 */
function stateDirFree(): boolean {
  if (settings.lock === undefined) return false;
  let text: string;
  try {
    text = readFileSync(settings.lock, 'utf8');
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
  try {
    const owner = JSON.parse(text) as { pid: number; startTime?: number };
    // The daemon that died (pid and start time: a zombie until reaped still has both), or a lock
    // whose process is gone; a new daemon that got the same pid has another start time.
    if (owner.pid === DAEMON && DAEMON_START !== undefined && owner.startTime === DAEMON_START) return true;
    return readStat(owner.pid)?.startTime !== owner.startTime;
  } catch {
    return false;
  }
}

/**
 * SIGKILL these sessions: each group whose leader is still the recorded process, the processes
 * carrying their marker, and their cgroups (`everyCgroup`: every session cgroup of this daemon).
 */
function killSessions(sessions: GuardedSession[], everyCgroup: boolean): void {
  for (const { pgid, startTime, spawnedAt } of sessions) {
    // Only a group whose leader is still the process recorded: a reused PID is never hit.
    const leader = readStat(pgid);
    if (!leader) continue;
    const same = startTime !== undefined ? leader.startTime === startTime : spawnedAt !== undefined && startedNear(leader.startTime, spawnedAt);
    if (!same) continue;
    try {
      process.kill(-pgid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  // Every session cgroup of this daemon (cgroup.kill, or its processes one by one): a process that
  // left the group and cleared its environment is still in its session's cgroup.
  for (const root of CGROUP_ROOTS) {
    let names: string[] = [];
    try {
      const ids = new Set(sessions.map((s) => `${SESSION_CGROUP_PREFIX}${s.id}`));
      names = readdirSync(root).filter((n) => n.startsWith(SESSION_CGROUP_PREFIX) && (everyCgroup || ids.has(n)));
    } catch {
      // gone
    }
    killDirs(names.map((n) => join(root, n)));
  }
  for (const list of findSessionProcesses(new Set(sessions.map((s) => s.id))).values()) {
    for (const { pid } of list) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  }
}

// Signals reach the guardian only through the daemon's bridge: the daemon handles them, and its
// end of stdin closing is what tells the guardian to act.
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT'] as const) process.on(signal, () => undefined);

const kept = settings.onCrash === 'keep' ? KeptDescriptors.open(KEEP_FD) : undefined;
if (kept instanceof Error) process.stderr.write(`procctl guardian: ${kept.message}; a crash kills the sessions\n`);
const keeper = kept instanceof KeptDescriptors ? kept : undefined;
keeper?.listen(settings.socket);
// The queue is drained on a timer, not as messages come: a session start wakes nobody.
const liveSessions = () => new Set(readSlots(readTable()).map((s) => s.id));
const drainer = keeper ? setInterval(() => keeper.drain(liveSessions), DRAIN_EVERY_MS) : undefined;

/**
 * The daemon died without a goodbye. With "kill", or nothing kept: kill everything. With "keep":
 * kill at once the sessions whose descriptors were not kept (younger than their first record, or
 * not keepable: a proxy that writes credentials in), then wait crashGraceMs for the next daemon to take the
 * rest; if none comes, kill everything as "kill" would. True when everything was killed (nothing
 * went to a next daemon).
 */
function crashed(): boolean {
  clearInterval(drainer);
  if (!keeper) return killAll();
  const sessions = readSlots(readTable());
  keeper.drain(() => new Set(sessions.map((s) => s.id)));
  // A session in a group a kept one leads (a persistent shell's command, in its shell's group) is kept with it.
  const keptGroups = new Set(sessions.filter((s) => keeper.has(s.id)).map((s) => s.pgid));
  killSessions(sessions.filter((s) => !keeper.has(s.id) && !keptGroups.has(s.pgid)), false);
  if (keeper.size === 0) {
    keeper.unlisten();
    return killAll();
  }
  let taken = false;
  try {
    taken = keeper.handOver(settings.crashGraceMs);
  } catch (err) {
    process.stderr.write(`procctl guardian: the hand-over to the next daemon failed: ${(err as Error).message}\n`);
  }
  return taken ? false : killAll();
}

let said = '';
process.stdin.setEncoding('utf8');
process.stdin.on('data', (chunk: string) => {
  said += chunk;
  // The daemon found the queue of kept descriptors full: take them now rather than at the next tick.
  if (keeper && chunk.includes('drain')) keeper.drain(liveSessions);
  if (said.length > 64) said = said.slice(-64);
});
/** Whether the daemon said `word` on a line of its own (its last 64 characters are kept). */
const saidLine = (word: string) => said.split('\n').includes(word);
let ending = false;
/** The daemon is gone: act on a crash (the cgroups of what was killed removed), then go. */
async function daemonGone(crash: boolean): Promise<void> {
  if (ending) return;
  ending = true;
  const told = crash && saidLine('orphaned');
  if (told || (crash && (await daemonRunsOn()))) {
    // A next image in the daemon's PID that could not read the hand-over closed this guardian's
    // pipe (saying so first, handover/in.ts): it serves, and stops the sessions of the last image
    // itself (as lost). Only those are this guardian's to kill; its subtrees, its new sessions'
    // cgroups and the path its own guardian listens on for a crash are the image's.
    process.stderr.write(`procctl guardian: the daemon runs on in a new image that did not take this guardian (${told ? 'it said so' : 'its process runs on'}); its sessions are killed, nothing else\n`);
    clearInterval(drainer);
    keeper?.stopListening();
    killSessions(readSlots(readTable()), false);
    process.exit(0);
  }
  const killed = crash && crashed();
  keeper?.unlisten();
  if (killed) await tidyCgroups().catch((err: Error) => process.stderr.write(`procctl guardian: ${err.message}\n`));
  process.exit(0);
}
process.stdin.on('end', () => void daemonGone(!saidLine('bye')));
process.stdin.on('error', () => void daemonGone(true));
