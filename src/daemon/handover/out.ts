import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, loadavg } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { loadAddon, packageRoot } from '../../base/addon.js';
import { conflict, restarting, unavailable } from '../../base/errors.js';
import { cannotHandOver, carryNeeds, handedDescriptors, handOver, holdOutputs, parkTerminals } from '../../runner/handover.js';
import { freezeReaping } from '../../runner/native.js';
import { readStat } from '../../runner/procfs.js';
import { heldResources } from '../../runner/cgroup.js';
import { carrySession } from '../../session/carry.js';
import { toRecord } from '../../session/persist.js';
import type { Session } from '../../session/session.js';
import type { CarriedShellEntry } from '../../shells/shells.js';
import { HANDOVER_ENV, HANDOVER_FORMAT, type Handover, type Restarts } from './schema.js';
import { cpuMs } from './timeline.js';
import { imageKey, rememberAnswer, rememberedAnswer } from './check-memo.js';
import { loadConfig } from '../../config/load.js';
import { requireSandbox, sandboxCheckKey } from '../../sandbox/host.js';
import { closeQuietly } from '../../base/close-quietly.js';

/** What the daemon lends a restart: its sessions, its socket, its guardian, its clients. */
export interface HandoverHost {
  log: Logger;
  /** The version this image started as (the package on disk may be newer already). */
  version: string;
  runtimeDir: string;
  running(): Session[];
  /** New work is refused as `restarting` and waits answer now while this is true. */
  restarting: boolean;
  closing: boolean;
  /** The listening socket's descriptor, and whether systemd handed it over. */
  listening(): { fd: number; activated: boolean } | undefined;
  /**
   * Hold the clients that connect from now on, unread (their requests wait in their sockets for
   * the next image); `resume` serves them here after all, `clients` names their descriptors.
   */
  holdClients(): { clients: () => number[]; resume: () => void };
  guardian(): { pid: number; pipe: number; table: number; keep?: number } | undefined;
  restarts: Restarts;
  /** The approver credential this image made, if it made one. */
  approverMade: string | undefined;
  /** The variables the next image needs to go on notifying systemd (NOTIFY_SOCKET, the watchdog's). */
  notifyEnv(): Record<string, string>;
  /** The daemon's own argv after the script (its --socket, --config, --log-level): the pre-flight starts with them. */
  args: string[];
  /** The --config it was started with, if any. */
  configFile: string | undefined;
  /** What review mode's probe found last, and the host's print then: carried, for the next image of the same version. */
  reviewChecked?(): { print: string; review: boolean; how?: 'overlayfs' | 'overlayfs in a user namespace'; reason?: string } | undefined;
  /** The state directory: where the pre-flight's answer is remembered (check-memo.ts). */
  stateDir: string;
  /** Records and the trail on disk before the image goes. */
  settleFiles(records: ReturnType<typeof toRecord>[]): Promise<void>;
  /** Every request still in flight is answered with this error, and nothing more is read until the returned undo. */
  abandonClients(err: Error): () => void;
  /** Resolves once the answers written to clients have gone out. */
  flushClients(): Promise<void>;
  /** The persistent shells (SPEC §20): each one's process is handed on as a session's job is, its running command with it. */
  shells?: { readonly size: number; cannotHandOver(): string | undefined; processes(): Session[]; hold(): () => void; carry(): CarriedShellEntry[] };
}

interface ExecAddon {
  execImage(file: string, argv: string[], env: string[]): never;
  dupDescriptor(fd: number): number;
  setInheritable(fd: number, inheritable: boolean): void;
}

const restartingError = () => restarting('the daemon is restarting into a new image; retry: the request is answered once it serves (in about a second)');
/** How long the answers to clients have to go out before the image goes: a client that does not read loses them (it reconnects). */
const FLUSH_MS = 2_000;

/** Where a test makes a step fail (docs/durability.md): the step's name in the daemon's environment. */
const FAULT_ENV = 'PROCCTL_FAULT_HANDOVER';

/** A planned restart prepared: the sessions to hand over, and how to undo what was done so far. */
export interface Prepared {
  sessions: Session[];
  /** The persistent shells' own processes, handed on with the sessions. */
  shells: Session[];
  /** The descriptors of the clients that connected during the hand-over, held unread for the next image. */
  clients: () => number[];
  from: string;
  to: string;
  at: number;
  /** When each step so far ended (ms since the epoch): the new image logs the restart's timeline. */
  steps: Record<string, number>;
  /** The key of the sandbox check the pre-flight (or this image) just passed for the config as it reads now. */
  sandboxChecked?: string;
  undo: () => void;
}

/**
 * Hand the running sessions to a new daemon image in this PID (SPEC §19), as a list of steps,
 * each with what it does and what undoing it means. `prepare` does everything that can still be
 * taken back and refuses (throws, the old image serving as before) when a step cannot be done;
 * `exec` is the last moment, synchronous: what runs now, nothing runs between it and the new image.
 *
 *  1. check    the addon can replace the image; the new image answers and reads this format   (nothing to undo)
 *  2. sessions every running session can be carried, else refuse naming them                   (nothing to undo)
 *  3. wind     new work is refused as `restarting`; waiting exec/poll/wait answer now           (undo: serve again)
 *  4. hold     every session's output stays in its pipe, unread                                 (undo: read again)
 *  5. settle   spools and records on disk, each session's record with its leader's start time  (nothing to undo)
 *  6. exec     reaping frozen, the state written, descriptors kept, clients answered, execve    (undo: all of 6, then 4, 3)
 */
export async function prepare(host: HandoverHost): Promise<Prepared> {
  const at = Date.now();
  if (host.closing) throw unavailable('the daemon is shutting down; there is nothing to restart');
  if (host.restarting || preparing) throw conflict('a restart is already under way; wait for it (procctl status shows restarts.lastAt)');
  preparing = true;
  try {
    return await prepareSteps(host, at);
  } catch (err) {
    preparing = false;
    throw err;
  }
}

/** One restart at a time: set from the first step until the image goes or the restart fails. */
let preparing = false;

async function prepareSteps(host: HandoverHost, at: number): Promise<Prepared> {
  // 1. check
  const addon = loadAddon<ExecAddon>(['execImage', 'dupDescriptor', 'setInheritable']);
  if (addon instanceof Error) throw unavailable(`a planned restart needs the daemon's addon, which replaces the image in place: ${addon.message}`);
  const steps: Record<string, number> = {};
  const step = (name: string) => (steps[name] = Date.now());
  const { version: to, carries, sandboxChecked } = await nextImage(host);
  fault('check');
  step('check');
  // 2. sessions
  const sessions = host.running();
  const beyond = (s: Session) => {
    const missing = carryNeeds(s).filter((k) => !carries.includes(k));
    return missing.length > 0 ? `the new image (version ${to}) does not carry a session of this kind (${missing.join(', ')})` : undefined;
  };
  const stuck = sessions.map((s) => ({ s, why: cannotHandOver(s) ?? beyond(s) })).filter((x) => x.why !== undefined);
  const shells = host.shells?.processes() ?? [];
  const shellsWhy = host.shells?.cannotHandOver() ?? ((host.shells?.size ?? 0) > 0 && !carries.includes('shells') ? `the new image (version ${to}) does not carry persistent shells; close them (procctl shell close NAME) first` : undefined) ?? shells.map(beyond).find((w) => w !== undefined);
  if (shellsWhy) throw conflict(`cannot hand the persistent shells to a new image: ${shellsWhy}. Nothing was restarted; try again in a moment, or close them (procctl shell close NAME)`);
  if (stuck.length > 0) {
    const list = stuck.map(({ s, why }) => `${s.id} (${s.name}): ${why}`).join('; ');
    throw conflict(`cannot hand these running sessions to a new image: ${list}. Nothing was restarted; wait for them or stop them, then restart`, {
      sessions: stuck.map(({ s, why }) => ({ sessionId: s.id, why })),
    });
  }
  // 3. wind down: new clients are held unread for the next image, new work is refused, waits answer
  const held = host.holdClients();
  host.restarting = true;
  for (const s of sessions) s.wakeWaiters();
  step('wind');
  const undoWind = () => {
    host.restarting = false;
    held.resume();
  };
  // 4. hold
  let resume: () => void = () => undefined;
  try {
    fault('wind');
    await pause('wind');
    const resumeOutputs = holdOutputs([...sessions, ...shells]);
    const resumeShells = host.shells?.hold() ?? (() => undefined);
    resume = () => {
      resumeShells();
      resumeOutputs();
    };
    step('hold');
    fault('hold');
    await pause('hold');
    // 5. settle
    const records = sessions.map((s) => toRecord(s, s.pid === undefined ? undefined : readStat(s.pid)?.startTime));
    await host.settleFiles(records);
    await Promise.all(sessions.map((s) => s.spool?.settle().then(() => s.spool?.trimToCount())));
    step('settle');
    fault('settle');
    await pause('settle');
  } catch (err) {
    resume();
    undoWind();
    throw failed('could not prepare the hand-over', err);
  }
  // The clients' requests, but this one: nothing more is read from the clients connected now, and
  // every request they sent is answered `restarting` (not run) while there is time for the answers
  // to go out. The clients reconnect; what they send meanwhile is held for the next image.
  const undoAbandon = host.abandonClients(restartingError());
  await Promise.race([host.flushClients(), new Promise((r) => setTimeout(r, FLUSH_MS).unref())]);
  step('flush');
  return {
    sessions,
    shells,
    from: host.version,
    to,
    at,
    steps,
    ...(sandboxChecked !== undefined ? { sandboxChecked } : {}),
    clients: held.clients,
    undo: () => {
      undoAbandon();
      resume();
      undoWind();
    },
  };
}

/**
 * The last step: nothing can come between it and the new image. Returns only when it failed;
 * then everything is as it was before `prepare`, and the error says why.
 */
export function exec(host: HandoverHost, p: Prepared): Error {
  const addon = loadAddon<ExecAddon>(['execImage', 'dupDescriptor', 'setInheritable']) as ExecAddon;
  const undo: (() => void)[] = [p.undo];
  const undoAll = () => {
    for (const fn of undo.reverse()) {
      try {
        fn();
      } catch (err) {
        host.log.error({ err }, 'restart: undoing a step failed');
      }
    }
  };
  let file: string | undefined;
  try {
    if (host.closing) throw unavailable('the daemon began to shut down during the hand-over; nothing was restarted');
    // A session that began to end between prepare and now (a kill came): refuse, it is this image's to finish.
    const late = [...p.sessions, ...p.shells].filter((s) => !s.running || cannotHandOver(s) !== undefined);
    if (late.length > 0) throw conflict(`sessions changed during the hand-over (${late.map((s) => s.id).join(', ')}); nothing was restarted, try again`);
    const listen = host.listening();
    if (!listen) throw unavailable('the daemon has no listening socket to hand over');
    const frozen = freezeReaping();
    undo.push(frozen.thaw);
    // node-pty reaps terminal sessions' leaders on threads of its own: they are parked until the exec.
    undo.push(parkTerminals([...p.sessions, ...p.shells]));
    const kept: number[] = [];
    const keep = (fd: number) => {
      kept.push(fd);
      addon.setInheritable(fd, true);
    };
    // Each on its own: one that is closed by now must not leave the others inheritable.
    undo.push(() => {
      for (const fd of kept) {
        try {
          addon.setInheritable(fd, false);
        } catch {
          // closed already (the listening socket's copy)
        }
      }
    });
    // The daemon's stdout and stderr (its log) go on into the new image: Node made them close-on-exec.
    for (const fd of [0, 1, 2]) keep(fd);
    // The listening socket as a copy of its own, so closing this image's handle never closes it.
    const listenFd = addon.dupDescriptor(listen.fd);
    keep(listenFd);
    undo.push(() => closeQuietly(listenFd));
    const clients = p.clients();
    for (const fd of clients) keep(fd);
    const guardian = host.guardian();
    if (guardian) {
      keep(guardian.pipe);
      keep(guardian.table);
      if (guardian.keep !== undefined) keep(guardian.keep);
    }
    const carried = p.sessions.map((s) => {
      const job = handOver(s);
      for (const fd of handedDescriptors(job)) keep(fd);
      if (job.stdinQueued > 0) host.log.warn({ sessionId: s.id, bytes: job.stdinQueued }, 'restart: input written to this session that it had not read yet stays with the old image and is not sent');
      const usage = heldResources(s);
      return { session: carrySession(s, s.pid === undefined ? undefined : readStat(s.pid)?.startTime), job, ...(usage ? { usage } : {}) };
    });
    const shells = host.shells?.carry() ?? [];
    for (const sh of shells) if (sh.box) for (const fd of handedDescriptors(sh.box.job)) keep(fd);
    const review = host.reviewChecked?.();
    const handover: Handover = {
      format: HANDOVER_FORMAT,
      from: { version: p.from, pid: process.pid, at: p.at, steps: { ...p.steps, exec: Date.now() }, cpuMs: cpuMs() },
      listen: { fd: listenFd, activated: listen.activated },
      clients,
      ...(guardian ? { guardian } : {}),
      ...(host.approverMade !== undefined ? { approver: host.approverMade } : {}),
      restarts: host.restarts,
      checked: { ...(p.sandboxChecked !== undefined ? { sandbox: p.sandboxChecked } : {}), ...(review ? { review: { version: p.from, ...review } } : {}) },
      sessions: carried,
      shells,
    };
    file = join(host.runtimeDir, `handover-${process.pid}.json`);
    writeFileSync(file, JSON.stringify(handover), { mode: 0o600 });
    const written = file;
    undo.push(() => rmSync(written, { force: true }));
    fault('exec');
    const env: NodeJS.ProcessEnv = { ...process.env, ...host.notifyEnv(), [HANDOVER_ENV]: file };
    // The socket systemd handed the first image is this hand-over's `listen` now.
    delete env.LISTEN_FDS;
    delete env.LISTEN_PID;
    delete env.LISTEN_FDNAMES;
    host.log.info({ sessions: carried.length, from: p.from, to: p.to }, 'restart: handing the running sessions to a new image');
    undo.push(host.abandonClients(restartingError()));
    host.log.flush();
    const argv = [process.execPath, ...process.execArgv, procctld(), ...host.args];
    addon.execImage(process.execPath, argv, Object.entries(env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`])));
    throw new Error('execve returned');
  } catch (err) {
    undoAll();
    preparing = false;
    const e = failed('the hand-over failed at its last step', err);
    host.log.error({ err: e.message }, 'restart failed; this image goes on serving');
    return e;
  }
}



/** The procctld of this package as installed now: an upgrade replaced its files, and it is what runs next. */
function procctld(): string {
  return join(packageRoot(), 'bin', 'procctld');
}

/** A refusal that keeps its kind, or an unavailable naming the step's error. */
function failed(what: string, err: unknown): Error {
  if (err instanceof Error && 'kind' in err) return err;
  return unavailable(`${what}: ${(err as Error).message}; the daemon goes on serving as before`);
}

/**
 * A pause a test asked for at this step (`PROCCTL_FAULT_HANDOVER=hold-<step>`, for
 * PROCCTL_FAULT_HANDOVER_HOLD_MS, default 3000): what clients meet while a hand-over is under way.
 */
async function pause(step: string): Promise<void> {
  if (process.env[FAULT_ENV] !== `hold-${step}`) return;
  await new Promise((r) => setTimeout(r, Number(process.env.PROCCTL_FAULT_HANDOVER_HOLD_MS ?? 3000)));
}

/** A failure a test asked for at this step. */
function fault(step: string): void {
  if (process.env[FAULT_ENV] === step) throw new Error(`${FAULT_ENV}=${step}: a failure injected at step "${step}"`);
}

/**
 * What the image that would start now says of itself (its format, version, and what it carries):
 * remembered from an earlier pre-flight of the very same image, config and environment
 * (check-memo.ts), else asked. A remembered answer still has this image check the sandbox the
 * config asks for, which the host may have lost meanwhile; if it cannot, the image is asked.
 */
async function nextImage(host: HandoverHost): Promise<{ version: string; carries: string[]; sandboxChecked?: string }> {
  const memo = join(host.stateDir, 'handover-check.json');
  let key: string | undefined;
  try {
    key = imageKey({ procctld: procctld(), root: packageRoot(), args: host.args, configFile: host.configFile, env: process.env });
  } catch (err) {
    host.log.warn({ err: (err as Error).message }, 'restart: the installed image could not be fingerprinted; its pre-flight is run every time');
  }
  const remembered = key === undefined ? undefined : rememberedAnswer(memo, key);
  const fits = remembered !== undefined ? hostStillFits(host) : undefined;
  if (remembered !== undefined && fits !== undefined) {
    host.log.info({ answer: remembered }, 'restart: the pre-flight of this very image, config and environment was run before; its answer is remembered');
    return { ...readAnswer(remembered), sandboxChecked: fits };
  }
  const before = configKey(host);
  const answer = await nextImageFormat(host.args);
  const read: { version: string; carries: string[]; sandboxChecked?: string } = readAnswer(answer);
  // The pre-flight checked the sandbox of the config as it reads now, with this environment: the
  // key the new image will find. A config edited meanwhile is checked by the new image itself.
  if (before !== undefined && before === configKey(host)) read.sandboxChecked = before;
  if (key !== undefined) {
    try {
      rememberAnswer(memo, key, answer);
    } catch (err) {
      host.log.warn({ err: (err as Error).message }, 'restart: the pre-flight\'s answer could not be remembered in the state directory; it is run again next time');
    }
  }
  return read;
}

/** The key of the sandbox check of the config as the daemon would load it now; undefined if it does not load. */
function configKey(host: HandoverHost): string | undefined {
  try {
    return sandboxCheckKey(loadConfig(host.configFile).config);
  } catch {
    return undefined;
  }
}

/** The config as the daemon would load it now, and the sandbox it asks for, still there: the key of that check, else undefined. */
function hostStillFits(host: HandoverHost): string | undefined {
  try {
    const config = loadConfig(host.configFile).config;
    requireSandbox(config);
    return sandboxCheckKey(config);
  } catch {
    return undefined;
  }
}

/** The pre-flight's words: a format this image writes, or a refusal. */
function readAnswer(answer: string): { version: string; carries: string[] } {
  const [format, version, carries] = answer.trim().split(/\s+/);
  if (Number(format) !== HANDOVER_FORMAT) {
    throw conflict(`the new daemon image (${procctld()}, version ${version ?? 'unknown'}) reads hand-over format ${format} and this one writes ${HANDOVER_FORMAT}: it cannot take the running sessions. Nothing was restarted; stop the sessions and use a full restart (systemctl restart), or install a version that reads format ${HANDOVER_FORMAT}`);
  }
  return { version: version ?? 'unknown', carries: carries ? carries.split(',') : [] };
}

/** The pre-flight's bound on a machine with a core to spare, and how far the load may stretch it. */
const PREFLIGHT_MS = 20_000;
const PREFLIGHT_STRETCH_MAX = 15;
/** Tests only (docs/testing.md): the bound where a core is free, in ms, instead of 20 s; the load still stretches it. */
const PREFLIGHT_ENV = 'PROCCTL_PREFLIGHT_MS';

/** The bound with a core to spare: 20 s, or what a test set in PROCCTL_PREFLIGHT_MS. */
function preflightBaseMs(): number {
  const set = Number(process.env[PREFLIGHT_ENV]);
  return Number.isFinite(set) && set > 0 ? set : PREFLIGHT_MS;
}

/**
 * How long the pre-flight may take: 20 s where a core is free, stretched by the tasks that share
 * each core (the 1-minute load average over the cores), up to 15 times (5 min). It is about one
 * second of CPU; a machine at load 45 on two cores gives a process a twentieth of a core or less,
 * and a fixed 20 s refused restarts there that would have gone through (docs/durability.md).
 */
export function preflightLimitMs(load = loadavg()[0], cores = availableParallelism(), base = preflightBaseMs()): number {
  return Math.round(base * Math.min(PREFLIGHT_STRETCH_MAX, Math.max(1, load / Math.max(1, cores))));
}

/**
 * The image that would start now (this package's bin/procctld, as installed now) answers which
 * hand-over format it reads: another format, or an image that does not start, refuses the restart
 * while the old one still serves. Returns its answer as it said it.
 */
function nextImageFormat(args: string[]): Promise<string> {
  // The load the bound is stretched for is the load its time-out reports: the two agree.
  const [load] = loadavg();
  const limitMs = preflightLimitMs(load);
  return new Promise((resolve, reject) => {
    // With the daemon's own options and environment: the new image loads its config, checks the
    // sandbox and limits it asks for and loads the addon, as its start will, and says so if it cannot.
    execFile(process.execPath, [...process.execArgv, procctld(), '--handover-format', ...args], { timeout: limitMs }, (err, stdout, stderr) => {
      // Killed by execFile at the limit, whatever it printed before (a warning is no refusal): a
      // time-out. An image that died of a signal of its own (killed false) did not start.
      if (err && (err as { killed?: boolean }).killed) {
        const said = stderr.trim().split('\n')[0];
        reject(unavailable(`the new daemon image (${procctld()}) did not answer its pre-flight within ${Math.round(limitMs / 1000)} s (load average ${load.toFixed(1)} on ${availableParallelism()} cores)${said ? `; it said: ${said}` : ''}; nothing was restarted: try again when the machine is less busy`));
        return;
      }
      if (err) {
        reject(unavailable(`the new daemon image (${procctld()}) did not start: ${(stderr || err.message).trim().split('\n')[0]}; nothing was restarted`));
        return;
      }
      resolve(stdout.trim());
    });
  });
}
