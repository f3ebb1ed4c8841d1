import { readFileSync, rmSync, writeSync } from 'node:fs';
import type { Logger } from 'pino';
import type { CgroupLayout } from '../../cgroup/host.js';
import type { Config } from '../../config/schema.js';
import { adoptJob, type HandedJob } from '../../runner/handover.js';
import { adoptChannels } from '../../runner/start.js';
import { adoptChild, nativeSpawner, reapChild } from '../../runner/native.js';
import { seedResources } from '../../runner/cgroup.js';
import { followOf, resumeSession } from '../../session/carry.js';
import type { Registry } from '../../session/registry.js';
import type { Session } from '../../session/session.js';
import type { Daemon } from '../../tools/context.js';
import { followSession } from '../../tools/exec.js';
import type { GuardianLink } from '../guardian-link.js';
import type { Records } from '../records.js';
import type { StateStore } from '../state.js';
import { HANDOVER_ENV, namedDescriptors, parseHandover, type Handover } from './schema.js';

/** What a new image was handed at start: the hand-over, or why it cannot read it (and the socket, read leniently). */
export type Inherited = { handover: Handover } | { problem: string; listenFd?: number; guardianPid?: number };

/** What a new image that cannot read its hand-over says to the last image's guardian before closing its pipe (daemon/guardian.ts). */
export const ORPHANED = 'orphaned';

/**
 * Read the hand-over this image was started with, if any (`$PROCCTL_HANDOVER`): first thing at
 * start, before inherited descriptors are closed, so the ones it names are kept. The file is
 * removed once read; the variable is taken out of the environment, so no job inherits it.
 */
export function readInherited(env: NodeJS.ProcessEnv = process.env): { inherited: Inherited | undefined; keep: number[] } {
  const file = env[HANDOVER_ENV];
  if (file === undefined) return { inherited: undefined, keep: [] };
  delete env[HANDOVER_ENV];
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    return { inherited: { problem: `the hand-over file ${file} could not be read: ${(err as Error).message}` }, keep: [] };
  } finally {
    rmSync(file, { force: true });
  }
  const keep = namedDescriptors(raw);
  const parsed = parseHandover(raw);
  if ('handover' in parsed) return { inherited: parsed, keep };
  // Read leniently: the socket, served on; and the last image's guardian, this PID's child still:
  // told on its pipe that the daemon runs on without it, before the pipe is closed with the rest,
  // it kills the sessions it watched and exits (guardian.ts), reaped here.
  const lenient = raw as { listen?: { fd?: unknown }; guardian?: { pid?: unknown; pipe?: unknown } } | null;
  const listenFd = lenient?.listen?.fd;
  const guardianPid = lenient?.guardian?.pid;
  const pipe = lenient?.guardian?.pipe;
  if (typeof pipe === 'number' && pipe > 2) {
    try {
      writeSync(pipe, `${ORPHANED}\n`);
    } catch {
      // gone or not a pipe: its end is the guardian's sign, as before (it checks whether this PID runs on)
    }
  }
  return {
    inherited: { problem: parsed.problem, ...(typeof listenFd === 'number' ? { listenFd } : {}), ...(typeof guardianPid === 'number' && guardianPid > 0 ? { guardianPid } : {}) },
    keep: typeof listenFd === 'number' ? [listenFd] : [],
  };
}

/** What the new image lends the adoption: its registry, records, guardian and the tools' follow-up. */
export interface AdoptionHost {
  daemon: Daemon;
  registry: Registry;
  log: Logger;
  config(): Config;
  state: StateStore;
  keeper: Records;
  guardian: GuardianLink;
  cgroups: CgroupLayout;
}

/**
 * The sessions of a hand-over, running again in this image (SPEC §19): each back in the registry
 * with its output, record and timers, its process wired again from its descriptors, followed as
 * its exec followed it, and protected by the guardian that never stopped. A session that cannot
 * be taken back is stopped and said lost, never left running untracked.
 */
export function adoptSessions(host: AdoptionHost, h: Pick<Handover, 'guardian' | 'sessions'>): { adopted: Session[]; lost: string[] } {
  if (h.guardian) {
    host.guardian.adopt(h.guardian);
    const addon = nativeSpawner();
    // The guardian is this PID's child still, and only our reaper knows it.
    if (!(addon instanceof Error)) adoptChild(addon, h.guardian.pid, (code, signal) => host.log.error({ code, signal }, 'the guardian exited; sessions are no longer protected against a daemon crash'));
  }
  const caps = host.config().tools.exec;
  const adopted: Session[] = [];
  const lost: string[] = [];
  for (const { session: carried, job, usage } of h.sessions) {
    let s: Session | undefined;
    try {
      s = resumeSession(carried, host.registry.events, caps, host.state.disk);
      host.registry.add(s);
      const id = carried.record.id;
      if (job.channels) adoptChannels(host.daemon, s, job.channels, (credential, why) => host.log.warn({ sessionId: id, credential }, `a session carried over: ${why}`));
      adoptJob(s, job as HandedJob, host.cgroups, (dirs) => host.log.error({ sessionId: carried.record.id, dirs }, 'a session cgroup could not be removed after its end'));
      if (usage) seedResources(s, usage);
      // Handed over by a planned restart whose guardian goes on: its record is on disk as the old
      // image wrote it, the guardian holds its slot and descriptors; given again once this image
      // serves (Records.afterServing). After a crash (no guardian carried), written at once.
      host.keeper.watch(s, h.guardian ? { handedOver: { startTime: carried.record.pidStartTime } } : { now: true });
      followSession(host.daemon, s, followOf(s));
      if (carried.record.status === 'waiting_input' && carried.record.interrupt) s.raiseInterrupt(carried.record.interrupt);
      adopted.push(s);
    } catch (err) {
      // Its record on disk says it ran: recovery, next, ends it as lost and terminates what is left
      // of it (by its pid and start time, its marker, its cgroup). Its leader is reaped here.
      lost.push(carried.record.id);
      host.log.error({ sessionId: carried.record.id, err }, 'restart: a session handed over could not be taken back; it is stopped as lost');
      if (s && host.registry.has(s.id)) host.registry.delete(s.id);
      const addon = nativeSpawner();
      if (!(addon instanceof Error)) adoptChild(addon, job.ends.pid, () => undefined);
    }
  }
  host.guardian.settled();
  return { adopted, lost };
}

/**
 * A hand-over this image could not read: the last image's guardian, this PID's child, sees its
 * pipe close, kills the sessions it watched and exits (guardian.ts); reaped here, not left a zombie.
 */
export function reapOldGuardian(pid: number, log: Logger): void {
  reapChild(pid, (code, signal) => log.info({ pid, code, signal }, "restart: the last image's guardian, not taken over, has exited"));
}
