import { existsSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { loadAddon } from '../../base/addon.js';
import type { Config } from '../../config/schema.js';
import { cannotHandOver, carryNeeds, handOver, type HandedJob } from '../../runner/handover.js';
import { leaderPidfd } from '../../runner/native.js';
import { channelsOf } from '../../runner/start.js';
import { NotifySchema, WaitForSchema } from '../../schema/exec.js';
import { followOf, type CarriedSession } from '../../session/carry.js';
import type { ShellCommandKept } from '../../session/keeper.js';
import type { SessionRecord } from '../../session/persist.js';
import { SessionRecordSchema } from '../../session/record.js';
import type { Session } from '../../session/session.js';
import { CarriedShellSchema } from '../../shells/carry.js';
import type { CarriedShellEntry } from '../../shells/shells.js';
import type { StateStore } from '../state.js';
import { HandedJobSchema, type Handover } from './schema.js';
import { closeQuietly } from '../../base/close-quietly.js';

/**
 * A crash (SPEC §19, docs/durability.md "A crash keeps the sessions"): what the daemon gives the
 * guardian of each running session, so that the session outlives the daemon, and how the next
 * daemon takes it back from the guardian. The adoption itself is the planned restart's
 * (handover/in.ts adoptSessions): a crash only builds the same hand-over from what the guardian
 * kept and what the last run left on disk.
 */

/** What the guardian keeps of a session besides its descriptors: one datagram's text. */
export const KeptSchema = z.object({
  id: z.string().min(1),
  /** Every session's but a shell's command's, which has no descriptors of its own (they are its shell's). */
  job: HandedJobSchema.omit({ ends: true, stdinQueued: true }).extend({
    pid: z.number().int().positive(),
    stdinId: z.string().optional(),
    /** Whether the third descriptor is its stdin (else it has none: /dev/null, or closed). */
    stdin: z.boolean(),
    /** A job on a terminal: its side's name (`/dev/pts/N`); the first descriptor is the terminal's master. */
    pts: z.string().min(1).optional(),
    /** A job on a terminal whose output goes through a tap (runner/launch/tap.ts): where among the descriptors the tap pipe's read end is. */
    tap: z.number().int().min(0).optional(),
    /** Where among the descriptors a pidfd to its leader is: how it ended, once whoever the crash left it to reaped it. */
    pidfd: z.number().int().min(0).optional(),
  }).optional(),
  scratch: z.object({ dir: z.string(), stopFile: z.string() }).optional(),
  checkpointKey: z.string().optional(),
  waitFor: WaitForSchema.optional(),
  notify: NotifySchema.optional(),
  /** A persistent shell's own process (SPEC §20): the shell as it was made, and its process's record (it has no record file). */
  shell: z.object({ state: CarriedShellSchema, record: SessionRecordSchema }).optional(),
  /** A persistent shell's command: the shell it runs in (that shell's process's session id) and its timeout. */
  command: z.object({ box: z.string().min(1), timeoutSec: z.number().min(0) }).optional(),
});
export type Kept = z.infer<typeof KeptSchema>;

/** What a session's message says besides its job: a persistent shell's own process, or a shell's command. */
export interface KeptExtra {
  shell?: { state: unknown; record: SessionRecord };
  command?: ShellCommandKept;
}

/**
 * Where a crashed run's guardian waits for the next daemon: in the state directory (0700), since
 * a daemon on the same state directory is the one that takes the sessions, whatever its socket.
 */
export function guardianSocket(stateDir: string): string {
  return join(stateDir, 'guardian.sock');
}

interface KeepAddon {
  keepConnect(path: string): { fd: number; uid: number };
  keepReceive(socket: number, timeoutMs: number): { messages: { text: string; fds: number[] }[]; closed: boolean };
}

/**
 * The kinds of session (runner/handover.ts carryNeeds) a crash keeps besides pipes: a terminal,
 * whose master the guardian holds; a sandbox, whose channel and proxy's listening sockets it
 * holds; a review, whose overlay is the job's and on disk; credentials, whose placeholders (never
 * their values) the guardian holds in the session's text, for the next daemon to write in the
 * values its config gives (docs/durability.md).
 */
const CRASH_KEEPS: ReadonlySet<string> = new Set(['terminal', 'terminal-tap', 'sandbox', 'review', 'credentials']);

/**
 * What the guardian is sent of a running session, once it has run ~100 ms (its first record):
 * undefined for a session a crash cannot keep (see CRASH_KEEPS), which the guardian kills when
 * the daemon dies. With the job's descriptors goes a pidfd to its leader (opened now, checked
 * against `startTime`, or the one an adoption after a crash holds): `opened`, the caller closes
 * once the message is sent (the guardian has its own copy).
 */
export function keptMessage(s: Session, extra?: KeptExtra, startTime?: number): { text: string; fds: number[]; opened?: number } | undefined {
  // A shell's command: its processes are its shell's, whose descriptors the shell's own message holds.
  if (extra?.command) {
    const kept: Kept = { id: s.id, command: extra.command, ...(s.checkpointKey ? { checkpointKey: s.checkpointKey } : {}), ...followOf(s) };
    return { text: JSON.stringify(kept), fds: [] };
  }
  if (cannotHandOver(s) !== undefined || carryNeeds(s).some((k) => !CRASH_KEEPS.has(k))) return undefined;
  const job = handOver(s);
  const ends = job.ends;
  const common = { timeoutSec: job.timeoutSec, killGraceMs: job.killGraceMs, limits: job.limits, ...(job.cgroup ? { cgroup: job.cgroup } : {}) };
  const terminal = 'terminal' in ends;
  const kept: Kept = {
    id: s.id,
    job: terminal
      ? { pid: ends.pid, stdinId: ends.pts, stdin: false, pts: ends.pts, ...common }
      : { pid: ends.pid, ...(ends.stdinId ? { stdinId: ends.stdinId } : {}), stdin: ends.stdin >= 0, ...common },
    ...(s.tmpdir && s.stopFile ? { scratch: { dir: s.tmpdir, stopFile: s.stopFile } } : {}),
    ...(s.checkpointKey ? { checkpointKey: s.checkpointKey } : {}),
    ...followOf(s),
    ...(extra?.shell ? { shell: extra.shell as Kept['shell'] } : {}),
  };
  const fds = terminal ? [ends.terminal] : [ends.stdout, ends.stderr, ...(ends.stdin >= 0 ? [ends.stdin] : [])];
  // A terminal's tap: only its read end is kept (what the tap moved and the spool has not), so the pipe ends with its daemon's write end.
  if (terminal && ends.tap) kept.job!.tap = fds.push(ends.tap.read) - 1;
  if (job.sandboxed) kept.job!.sandboxed = true;
  // A confined job's channels: their descriptors follow the job's ends, named in the text by their place among them.
  if (job.channels) kept.job!.channels = mapChannels(job.channels, (fd) => fds.push(fd) - 1);
  const opened = ends.pidfd === undefined ? leaderPidfd(ends.pid, startTime) : undefined;
  const pidfd = ends.pidfd ?? opened;
  if (pidfd !== undefined) kept.job!.pidfd = fds.push(pidfd) - 1;
  return { text: JSON.stringify(kept), fds, ...(opened !== undefined ? { opened } : {}) };
}

type Channels = NonNullable<HandedJob['channels']>;

/** The same channels with each descriptor mapped (to its place in a message, or back); undefined where `map` says so. */
function mapChannels(ch: Channels, map: (fd: number) => number | undefined): Channels | undefined {
  const one = <C extends { control?: number; listeners?: number[] }>(c: C | undefined): C | undefined | false => {
    if (!c) return undefined;
    const control = c.control === undefined ? undefined : map(c.control);
    const listeners = c.listeners?.map(map);
    if ((c.control !== undefined && control === undefined) || listeners?.some((l) => l === undefined)) return false;
    return { ...c, ...(control !== undefined ? { control } : {}), ...(listeners ? { listeners: listeners as number[] } : {}) };
  };
  const checkpoint = one(ch.checkpoint);
  const proxy = one(ch.proxy);
  if (checkpoint === false || proxy === false) return undefined;
  return { ...(checkpoint ? { checkpoint } : {}), ...(proxy ? { proxy } : {}) };
}

/**
 * When what keptMessage gives of a session will have changed, for it to be sent again: a proxy
 * whose helper is still sending its listening sockets (they come a moment after the job starts).
 */
export function keptChanges(s: Session): Promise<void> | undefined {
  return channelsOf(s).proxy?.settled?.();
}

/** The job's ends from what the guardian kept: a terminal's master, or its pipes; undefined when a descriptor is missing. */
function keptEnds(job: NonNullable<Kept['job']>, fds: number[]): HandedJob['ends'] | undefined {
  // Without its pidfd (a guardian of an older build) the job is taken all the same: its status may then be unknown.
  const pidfd = job.pidfd === undefined || fds[job.pidfd] === undefined ? {} : { pidfd: fds[job.pidfd] };
  if (job.pts !== undefined) {
    // Its tap's read end: what the dead daemon moved from the master and had not spooled, read first.
    const tap = job.tap === undefined ? {} : fds[job.tap] === undefined ? undefined : { tap: { read: fds[job.tap]! } };
    return fds[0] !== undefined && tap ? { pid: job.pid, terminal: fds[0], pts: job.pts, ...pidfd, ...tap } : undefined;
  }
  const [stdout, stderr, stdin] = fds;
  if (stdout === undefined || stderr === undefined || (job.stdin && stdin === undefined)) return undefined;
  return { pid: job.pid, stdout, stderr, stdin: job.stdin ? stdin! : -1, ...(job.stdinId ? { stdinId: job.stdinId } : {}), ...pidfd };
}

/** A session the guardian handed back: what it kept, and the descriptors it held. */
export interface Taken {
  kept: Kept;
  fds: number[];
}

/** How long the next daemon waits for the guardian to send everything it holds. */
const TAKE_TIMEOUT_MS = 10_000;

/**
 * At start, before recovery: a guardian of a crashed run that waits in our state directory hands over
 * the sessions it kept (their descriptors and what the records do not say). Only a guardian of our
 * own user is listened to. Nothing waits: an empty list.
 */
export function takeFromGuardian(stateDir: string, log: Logger): Taken[] {
  const path = guardianSocket(stateDir);
  if (!existsSync(path)) return [];
  const addon = loadAddon<KeepAddon>(['keepConnect', 'keepReceive']);
  if (addon instanceof Error) {
    log.error({ err: addon.message }, 'a guardian holds the sessions of a crashed run, and this daemon cannot take them without its addon: they are killed at the end of their grace');
    return [];
  }
  let conn: { fd: number; uid: number };
  try {
    conn = addon.keepConnect(path);
  } catch (err) {
    // A socket file left by a guardian that is gone (its grace ended, it was killed): nothing to take.
    log.debug({ err: (err as Error).message }, 'no guardian waits with sessions of a crashed run');
    return [];
  }
  const taken: Taken[] = [];
  try {
    if (conn.uid !== process.getuid?.()) {
      log.error({ path, uid: conn.uid }, 'the process listening on the guardian socket belongs to another user: not taking anything from it');
      return [];
    }
    const { messages } = addon.keepReceive(conn.fd, TAKE_TIMEOUT_MS);
    for (const m of messages) {
      try {
        taken.push({ kept: KeptSchema.parse(JSON.parse(m.text)), fds: m.fds });
      } catch (err) {
        for (const fd of m.fds) closeQuietly(fd);
        log.error({ err: (err as Error).message }, 'the guardian handed over a session this daemon cannot read; it is recovered as lost');
      }
    }
  } catch (err) {
    log.error({ err: (err as Error).message }, 'the guardian\'s hand-over did not complete; what it held is recovered as lost');
  } finally {
    closeQuietly(conn.fd);
  }
  return taken;
}

/**
 * The planned restart's hand-over, made from what a crash left: each session's record as the last
 * run wrote it, its output so far from its spool (kept whole: the daemon cannot know what a poll
 * had returned, so `poll` returns it again: at least once, never lost), and the descriptors the
 * guardian kept. A session that cannot be taken (no running record, another pid, a descriptor
 * missing) is not: its descriptors are closed, recovery terminates what is left of it, and
 * `unfit` says why, for its record.
 */
export function crashHandover(taken: Taken[], state: StateStore, config: Config, log: Logger): Pick<Handover, 'sessions' | 'shells'> & { unfit: Map<string, string>; lostShells: { scope: string; name: string; why: string }[] } {
  const caps = config.tools.exec;
  const sessions: Handover['sessions'] = [];
  const shells: CarriedShellEntry[] = [];
  const unfitOnes = new Map<string, string>();
  const lostShells: { scope: string; name: string; why: string }[] = [];
  // A shell's command has no descriptors of its own: it goes with its shell (below), by the shell's process's id.
  const commandOf = new Map<string, Taken>();
  for (const t of taken) if (t.kept.command) commandOf.set(t.kept.command.box, t);
  for (const { kept, fds } of taken) {
    if (kept.command) continue;
    const r = kept.shell ? kept.shell.record : state.readRunning(kept.id);
    const ends = kept.job && keptEnds(kept.job, fds);
    const channels = kept.job?.channels && mapChannels(kept.job.channels, (at) => fds[at]);
    const unfit = !r
      ? 'no running record of it here'
      : !kept.job
        ? 'the guardian kept no process of it'
        : r.pid !== kept.job.pid
          ? `its record names pid ${r.pid}, the guardian kept pid ${kept.job.pid}`
          : !ends
            ? 'the guardian did not keep all of its output descriptors'
            : kept.job.channels && !channels
              ? 'the guardian did not keep all of its channel descriptors'
              : undefined;
    if (unfit || !r || !ends || !kept.job) {
      for (const fd of fds) closeQuietly(fd);
      log.warn({ sessionId: kept.id, why: unfit, kept: fds.length, shell: kept.shell?.state.name }, 'crash: a session the guardian kept cannot be taken; it is recovered as lost');
      if (unfit) unfitOnes.set(kept.id, `the guardian kept it through the crash, but this daemon could not take it: ${unfit}`);
      if (kept.shell) lostShells.push({ scope: kept.shell.state.scope, name: kept.shell.state.name, why: `the daemon crashed and the guardian kept the shell, but the next daemon could not take it back (${unfit}); its state is gone` });
      continue;
    }
    const { pid: _pid, stdinId: _stdinId, stdin: _stdin, pts: _pts, channels: _channels, pidfd: _pidfd, tap: _tap, ...rest } = kept.job;
    const job: HandedJob = { ...rest, stdinQueued: 0, ends, ...(channels ? { channels } : {}) };
    if (kept.shell) {
      // A persistent shell (SPEC §20): its own process, never recorded nor spooled, and the command it ran, if any.
      const box: CarriedSession = { record: { ...r, adopted: 'crash' }, held: {}, ...(kept.scratch ? { scratch: kept.scratch } : {}), paused: { before: 0 } };
      const c = commandOf.get(kept.id);
      const cr = c && state.readRunning(c.kept.id);
      const command = c && cr && cr.pid === r.pid ? carriedFromRecord(cr, c.kept, state, caps) : undefined;
      const running = command && c?.kept.command ? { sessionId: c.kept.id, interrupted: false, timeoutSec: c.kept.command.timeoutSec } : undefined;
      const { running: _running, cut: _cut, settling: _settling, ...shell } = kept.shell.state;
      shells.push({ shell: { ...shell, pending: '', ...(running ? { running } : {}) }, box: { session: box, job }, ...(command ? { command } : {}) });
      continue;
    }
    sessions.push({ session: carriedFromRecord(r, kept, state, caps), job });
  }
  return { sessions, shells, unfit: unfitOnes, lostShells };
}

/** A running session as the last run's record and spool say, for the planned restart's adoption (`adopted: "crash"`). */
function carriedFromRecord(r: SessionRecord, kept: Kept, state: StateStore, caps: Config['tools']['exec']): CarriedSession {
  const spoolFile = state.spoolPath(kept.id);
  const onDisk = spoolBytes(spoolFile);
  const dropped = r.spool?.droppedBytes ?? 0;
  const counts = { ...(r.spool ?? { droppedBytes: 0 }), totalBytes: Math.max(r.spool?.totalBytes ?? 0, onDisk + dropped) };
  const text = readSpool(spoolFile);
  const record: SessionRecord = {
    ...r,
    adopted: 'crash',
    spool: counts,
    output: { retained: tail(text, caps.maxOutputChars), dropped: Math.max(0, text.length - caps.maxOutputChars), total: text.length, pending: tail(text, caps.pendingMaxOutputChars) },
  };
  return {
    record,
    held: {},
    ...(kept.scratch ? { scratch: kept.scratch } : {}),
    ...(kept.checkpointKey ? { checkpointKey: kept.checkpointKey } : {}),
    ...(kept.waitFor ? { waitFor: kept.waitFor } : {}),
    ...(kept.notify ? { notify: kept.notify } : {}),
    paused: { before: 0 },
    ...(caps.maxLogBytes > 0 ? { spool: { file: spoolFile, maxBytes: caps.maxLogBytes } } : {}),
  };
}

function spoolBytes(file: string): number {
  let n = 0;
  for (const f of [file, `${file}.1`]) {
    try {
      n += statSync(f).size;
    } catch {
      // no such segment
    }
  }
  return n;
}

function readSpool(file: string): string {
  const parts: Buffer[] = [];
  for (const f of [`${file}.1`, file]) {
    try {
      parts.push(readFileSync(f));
    } catch {
      // no such segment
    }
  }
  return Buffer.concat(parts).toString('utf8');
}

function tail(text: string, max: number): string {
  return text.length > max ? text.slice(text.length - max) : text;
}

