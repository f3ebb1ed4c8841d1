import { nanoid } from 'nanoid';
import { closeSync, openSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import type { CgroupsAhead } from '../cgroup/ahead.js';
import type { CgroupLayout } from '../cgroup/host.js';
import { joinCgroup } from '../cgroup/join.js';
import { checkAsked, sessionLimits } from '../cgroup/limits.js';
import { SessionCgroup } from '../cgroup/session.js';
import { join } from 'node:path';
import type { Config, NetworkPolicy } from '../config/schema.js';
import { limit } from '../base/errors.js';
import { byName, networkOf, proxyEnv } from '../sandbox/network.js';
import { carriedCredentials, credentialsOf, credentialVariable, sessionCredentials, type SessionCredential } from '../sandbox/credentials.js';
import { planLaunch, sessionUser, type Confinement, type LaunchPlan } from '../sandbox/plan.js';
import { accessProblem, type RunAs } from '../sandbox/user.js';
import { describeWaitFor, type ExecParams } from '../schema/exec.js';
import type { RecordKeeper, SessionFiles } from '../session/keeper.js';
import { deriveName } from '../session/name.js';
import type { Registry } from '../session/registry.js';
import { Session, type ChangesSummary, type InterruptOutcome, type SessionDecision } from '../session/session.js';
import { Spool } from '../session/spool.js';
import { JobEnv } from './env.js';
import { closeEnter, showAsRoot, type Ahead, type MountsAhead } from './premount.js';
import { scratchFor, type ScratchDirs } from './scratch.js';
import { resolveShell, shellArgs } from './shell.js';
import { EXIT_STATUS_FILE, spawnSession } from './spawn.js';
import { abandon, startOnPipes } from './launch/pipes.js';
import { stopFileOwner } from './stop.js';

/** What a launch needs from the daemon: the config in force, where files go, who keeps records. */
export interface LaunchContext {
  config(): Config;
  socketPath: string;
  registry: Registry;
  scratch: ScratchDirs;
  state: Pick<SessionFiles, 'spoolPath' | 'disk' | 'dir'>;
  keeper: RecordKeeper;
  /** The daemon's own paths (its socket and runtime directory, state directory, config, log, approver credential): hidden from a sandboxed job. */
  controls(): readonly string[];
  /** A confined job's line back to the daemon: a descriptor of its own that takes `checkpoint` for its session only. */
  channels: ChannelHost;
  /** Where sessions' cgroups go on this host (SPEC §15), found at start; mode "none" where there are none. */
  cgroups: CgroupLayout;
  /** Session cgroups made ahead, each under the id its session takes (cgroup/ahead.ts); none where absent. */
  cgroupsAhead?: CgroupsAhead;
  /**
   * Where what happened is told (the daemon's AuditBus, audit/events.ts, a layer above this one):
   * here, each connection a session's proxy refuses.
   */
  audit: {
    readonly listening: boolean;
    emit(e: { type: 'network_refused'; sessionId: string; scope: string; host: string; reason: string; first: boolean } | { type: 'credential_used'; sessionId: string; scope: string; name: string; host: string }): void;
  };
  /** What jobs with credentials trust (SPEC §21): the system's roots and the daemon's CA, as PEM; undefined when the daemon has no CA. */
  trustBundle?(): string | undefined;
  /** Review mode's keeper (changes/held.ts): told of each review session before its job runs. */
  held: { begin(id: string, workspace: string, startedAt: number, o?: { approval?: boolean; from?: string; rootMode?: number }): ChangesSummary };
  /** Review sessions' overlays mounted ahead (premount.ts): taken here, and the next one made once this session has started. */
  ahead?: MountsAhead;
}

/** A session's own channel back (daemon/channel.ts). */
export interface Channel {
  /** The job's end, a descriptor it inherits (`$PROCCTL_SOCKET` is `fd:N`). */
  fd: number;
  /** The job has it (or will never start): the daemon closes its copy of the job's end. */
  handedOver(): void;
  /** The session is over. */
  close(): void;
  /** A planned restart's quiet moment: take nothing more from the job (it waits in the kernel) until the returned resume. */
  hold?(): () => void;
  /** The descriptors a planned restart hands to the next image (SPEC §19). */
  carry?(): CarriedChannel;
  /** A proxy whose helper has not yet sent all its listening sockets: when it has (what `carry` gives changes then). */
  settled?(): Promise<void> | undefined;
}

/** A session's channel as a restart hands it on: the daemon's end of it, and a proxy's listening sockets. */
export interface CarriedChannel {
  control?: number;
  listeners?: number[];
}

/** Opens a session's own channel, or says why it cannot be had here. */
export interface ChannelHost {
  /** `carried`: the channel of a session a planned restart handed over (SPEC §19), wired again. */
  open(sessionId: string, carried?: CarriedChannel): Channel | Error;
  /** Network by name: the channel the sandbox's proxy helper asks the daemon's proxy for streams on; refusals go to `denied`. */
  openProxy(sessionId: string, policy: ByNamePolicy, denied: (host: string, reason: string) => void, carried?: CarriedChannel, credentials?: ProxyCredentials): Channel | Error;
}

/** A session's credentials as its proxy gets them (SPEC §21). */
export interface ProxyCredentials {
  credentials: readonly SessionCredential[];
  /** sandbox.network.upstreamCa, read. */
  upstreamCa?: string;
  used(name: string, host: string): void;
}

/** A session's channels, for a planned restart to hold and hand over. */
export interface SessionChannels {
  checkpoint?: Channel;
  proxy?: Channel;
  /** The network policy its proxy enforces: the one in force when it started, carried with it. */
  policy?: ByNamePolicy;
  /** Its proxy writes credentials in (SPEC §21): each one's placeholder, carried by a restart and a crash (never the value). */
  credentials?: readonly CarriedCredential[];
}

/** A session's credential as a restart or a crash carries it: its name, the hosts it was given for, its placeholder; never the value. */
export interface CarriedCredential {
  name: string;
  hosts: string[];
  placeholder: string;
}

const channelsBySession = new WeakMap<Session, SessionChannels>();

/** The channels a running session's job holds (empty when none). */
export function channelsOf(s: Session): SessionChannels {
  return channelsBySession.get(s) ?? {};
}

/** Where a proxy's refusal is told: counted on the session, and on the audit trail. */
function refusals(ctx: Pick<LaunchContext, 'audit'>, id: string, scope: string, session: () => Session | undefined) {
  return (host: string, reason: string) => {
    const s = session();
    if (!s) return;
    const first = s.noteDenied(host, reason);
    if (ctx.audit.listening) ctx.audit.emit({ type: 'network_refused', sessionId: id, scope, host, reason, first });
  };
}

/**
 * The channels of a session a planned restart handed over, wired again in this image (SPEC
 * §19): the checkpoint channel from its end, the proxy from its listening sockets, with the
 * policy it started with. Throws when one cannot be had (the session is then stopped as lost).
 */
export function adoptChannels(
  ctx: Pick<LaunchContext, 'audit' | 'channels' | 'config' | 'trustBundle'>,
  session: Session,
  carried: { checkpoint?: CarriedChannel; proxy?: CarriedChannel & { policy: CarriedPolicy; credentials?: CarriedCredential[] } },
  log?: (credential: string, why: string) => void,
): void {
  const got: SessionChannels = {};
  if (carried.checkpoint) {
    const c = ctx.channels.open(session.id, carried.checkpoint);
    if (c instanceof Error) throw c;
    got.checkpoint = c;
  }
  if (carried.proxy) {
    const { policy: names, credentials: placeholders, ...ends } = carried.proxy;
    const policy: ByNamePolicy = { ...names, credentials: [] };
    // Its credentials (SPEC §21): the placeholders it holds, each with the value the config gives now (credentials.ts carriedCredentials).
    let creds: ProxyCredentials | undefined;
    if (placeholders?.length) {
      ctx.trustBundle?.();
      const config = ctx.config();
      const net = byName(networkOf(config, session.scope));
      let upstreamCa: string | undefined;
      let caProblem: string | undefined;
      try {
        upstreamCa = net?.upstreamCa === undefined ? undefined : readUpstreamCa(net.upstreamCa);
      } catch (err) {
        caProblem = (err as Error).message;
      }
      const list = carriedCredentials(credentialsOf(config, session.scope), placeholders, caProblem);
      for (const c of list) if (c.withdrawn !== undefined) log?.(c.name, c.withdrawn);
      const live = list.filter((c) => c.withdrawn === undefined);
      // An upstream or the job printing a value: said as the credential's name, as at the start.
      session.scrubOutput(live.map((c) => ({ find: c.value, put: `[credential ${c.name}]` })));
      creds = {
        credentials: list,
        upstreamCa,
        used: (name, host) => {
          if (ctx.audit.listening) ctx.audit.emit({ type: 'credential_used', sessionId: session.id, scope: session.scope, name, host });
        },
      };
      got.credentials = placeholders;
    }
    const c = ctx.channels.openProxy(session.id, policy, refusals(ctx, session.id, session.scope, () => session), ends, creds);
    if (c instanceof Error) {
      got.checkpoint?.close();
      throw c;
    }
    got.proxy = c;
    got.policy = policy;
  }
  channelsBySession.set(session, got);
  void session.finished.then(() => {
    got.checkpoint?.close();
    got.proxy?.close();
  });
}


type ByNamePolicy = Exclude<NetworkPolicy, boolean>;
/** What a planned restart carries of a proxy's policy: the names it allows and denies. */
type CarriedPolicy = Pick<ByNamePolicy, 'allow' | 'deny'>;

/** An exec that policy let through, as the runner starts it. */
export interface JobRequest {
  scope: string;
  /** The exec's params, validated (schema/exec.ts). */
  params: ExecParams;
  /** The working directory, resolved and checked to exist. */
  cwd: string;
  /** What policy decided: the variables the session inherits from the daemon, and whether it runs elevated (no sandbox, no limits, no user change). */
  policy: { inherited: NodeJS.ProcessEnv; elevated: boolean };
  /** An approved exec takes the id of the session that waited for it, and its approval history. */
  approved?: { id: string; history: InterruptOutcome[] };
  /**
   * Review mode (SPEC §16): the workspaces are overlays, their writes kept under `<state>/changes/<id>`;
   * `approval`: an approval rule said review, so its changes wait for a person's answer once it ends.
   */
  review?: { approval: boolean };
  /** How the rules judged it (an approved exec: as they judged it when it asked). */
  decision?: SessionDecision;
  /** A command of a review shell (SPEC §20): the session names the shell, and its job runs `script` (the command wrapped with the shell's state). */
  shell?: { name: string; script: string };
}

/**
 * Start a session, the one place a launch happens, in order: room in the scope and its limits,
 * the launch plan (sandbox, user, limits, asked once), the scratch directory and stop file, the
 * environment, the session's cgroup, the spawn (on a terminal, or by fork where the addon is
 * missing: once the session is made), the session and its spool, the wiring, the watch. A plan this host cannot carry out ends the
 * session at once as a spawn error (nothing ran); it never runs unconfined. Returns the session
 * and any warning for the answer's text.
 *
 * Where the parts of a launch go: the job's own checkpoint channel is opened here and its end
 * handed to the spawn as a descriptor the plan names; the seccomp filter, the operator's
 * workspaces and the network proxy's socket are parts of the plan (sandbox/plan.ts); a session's
 * cgroup is made before the spawn and given to it, and the watch reads its end from it.
 */
export function startJob(ctx: LaunchContext, req: JobRequest): { session: Session; warnings: string[] } {
  const config = ctx.config();
  const cfg = config.tools.exec;
  const { params: p, scope } = req;
  roomFor(ctx.registry, scope, cfg.maxSessions);
  // Limits within the scope's (forbidden past them), and only those this host can enforce.
  const limits = sessionLimits(config, scope, p.limits, req.policy.elevated);
  checkAsked(ctx.cgroups, p.limits);

  // An approved exec has its id since it was asked for; another may take a cgroup made ahead, and its id with it.
  const ahead = req.approved ? undefined : ctx.cgroupsAhead?.take(limits);
  const id = req.approved?.id ?? ahead ?? ctx.registry.newId();
  const confine: Confinement = { config, scope, elevated: req.policy.elevated };
  // A confined job cannot reach the daemon's socket: it reports through a channel of its own.
  const confined = !req.policy.elevated && (config.sandbox.mode !== 'off' || config.sandbox.user !== undefined);
  let dir = ctx.scratch.take();
  let plan: LaunchPlan | undefined;
  let user: RunAs | undefined;
  let refused: string | undefined;
  try {
    user = sessionUser(confine);
    if (user) {
      const problem = accessProblem(req.cwd, user);
      if (problem) throw new Error(problem);
      dir = scratchFor(user, dir);
    }
  } catch (err) {
    refused = (err as Error).message;
  }
  const stopFile = join(dir, 'stop.json');
  // 144 random bits (24 URL-safe characters), from nanoid's pool: a randomBytes call here took ~20 µs on an exec's way.
  const checkpointKey = nanoid(24);
  const opened = confined && refused === undefined ? ctx.channels.open(id) : undefined;
  const channel = opened instanceof Error ? undefined : opened;
  // Network by name (SPEC §12): a proxy channel for the sandbox's helper; refusals are counted on the session, once it exists.
  const netPolicy = confined && refused === undefined && config.sandbox.mode !== 'off' ? byName(networkOf(config, scope)) : undefined;
  let late: Session | undefined;
  const onRefused = refusals(ctx, id, scope, () => late);
  // Credentials (SPEC §21): a placeholder per session in the job's environment, the value only in the proxy.
  let creds: SessionCredential[] = [];
  let upstreamCa: string | undefined;
  if (netPolicy) {
    try {
      creds = sessionCredentials(credentialsOf(config, scope));
      upstreamCa = netPolicy.upstreamCa === undefined ? undefined : readUpstreamCa(netPolicy.upstreamCa);
      if (creds.length > 0 && !ctx.trustBundle?.()) throw new Error('this session has credentials but the daemon has no CA to end TLS with for their hosts');
    } catch (err) {
      refused = (err as Error).message;
    }
  }
  const onUsed = (name: string, host: string) => {
    if (ctx.audit.listening) ctx.audit.emit({ type: 'credential_used', sessionId: id, scope, name, host });
  };
  // A credential's hosts are allowed hosts.
  const proxyPolicy = netPolicy && creds.length > 0 ? { ...netPolicy, allow: [...netPolicy.allow, ...creds.flatMap((c) => c.hosts)] } : netPolicy;
  const proxyOpened = proxyPolicy && refused === undefined ? ctx.channels.openProxy(id, proxyPolicy, onRefused, undefined, creds.length > 0 ? { credentials: creds, upstreamCa, used: onUsed } : undefined) : undefined;
  const proxy = proxyOpened instanceof Error ? undefined : proxyOpened;
  if (proxyOpened instanceof Error) refused = proxyOpened.message;
  const bundle = proxy && creds.length > 0 ? writeBundle(dir, ctx.trustBundle!()!) : undefined;
  const shell = resolveShell(process.env);
  // Nothing the job inherits carries a credential's value (a valueEnv the env policy did not withhold, a copy of it).
  const env = JobEnv.of(req.policy.inherited, p.env, {
    PROCCTL_SESSION_ID: id,
    PROCCTL_SCOPE: scope,
    PROCCTL_SOCKET: channel ? `fd:${channel.fd}` : ctx.socketPath,
    PROCCTL_STOP_FILE: stopFile,
    PROCCTL_TMPDIR: dir,
    PROCCTL_CHECKPOINT_KEY: checkpointKey,
    ...(user ? { HOME: user.home, USER: user.name, LOGNAME: user.name } : {}),
    ...(proxy ? proxyEnv() : {}),
    ...(proxy ? Object.fromEntries(creds.map((c) => [credentialVariable(c.name), c.placeholder])) : {}),
    ...(bundle ? trustEnv(bundle) : {}),
  }).without(creds.map((c) => c.value), p.env);
  let changes: ChangesSummary | undefined;
  /** The workspace a review session's overlay covers. */
  let review: string | undefined;
  /** bwrap's --json-status-fd: the daemon's copy is closed once the job has it. */
  let statusFd: number | undefined;
  if (refused === undefined) {
    try {
      // Under bwrap (not on a terminal, which starts another way): bwrap writes the job's exit status where a daemon after a crash finds it.
      if (config.sandbox.mode !== 'off' && !req.policy.elevated && !p.pty) statusFd = openSync(join(dir, EXIT_STATUS_FILE), 'w', 0o600);
      const job = { shell, args: shellArgs(shell, req.shell?.script ?? p.command), cwd: req.cwd, scratch: dir, channel: channel?.fd, proxy: proxy?.fd, review: req.review ? changesDir(ctx.state.dir, id) : undefined, status: statusFd };
      // The daemon's own paths (a look at its stdout and stderr among them) only when a sandbox hides them.
      const secretFiles = creds.flatMap((c) => (c.file === undefined ? [] : [c.file]));
      plan = planLaunch(confine, { ...job, get hidden() { return [...ctx.controls(), ...secretFiles]; } }, user);
      if (plan.overlays?.length) {
        const overlay = plan.overlays[0];
        review = overlay.target;
        // A terminal mounts with util-linux (sandbox/plan.ts wrapped): only the spawner joins a mount made ahead.
        const ahead = p.pty ? undefined : ctx.ahead?.take(review);
        try {
          const root = statSync(review);
          changes = ctx.held.begin(id, review, Date.now(), { approval: req.review?.approval, from: ahead?.dir, rootMode: root.mode & 0o7777 });
          // The upper root shown as the workspace root, before it is mounted; a mount made ahead had it already (premount.ts).
          if (!ahead) showAsRoot(overlay.upper, root);
        } catch (err) {
          if (ahead) ctx.ahead!.letGo(ahead);
          throw err;
        }
        if (ahead) plan = entering(plan, ahead.enter);
      }
    } catch (err) {
      refused = (err as Error).message;
      // Nothing of a refused plan runs: what it holds (a filter, namespaces made ahead) is let go now.
      plan?.release();
      plan = undefined;
    }
  }
  // The session's cgroup exists before its first process, which joins it before it runs anything.
  let cgroup: SessionCgroup | undefined;
  if (plan && ctx.cgroups.mode !== 'none') {
    try {
      cgroup = ahead === undefined ? SessionCgroup.create(ctx.cgroups, id, limits) : SessionCgroup.madeAhead(ctx.cgroups, id, limits);
      plan = joinCgroup(plan, cgroup.joinFiles);
    } catch (err) {
      refused = (err as Error).message;
      cgroup?.remove();
      cgroup = undefined;
      plan.release();
      plan = undefined;
    }
  }
  // The cgroup made ahead is the session's now, or goes with a refusal.
  if (ahead !== undefined && cgroup !== undefined) ctx.cgroupsAhead?.used(ahead);
  else if (ahead !== undefined) ctx.cgroupsAhead?.drop(ahead);

  // A job on pipes starts now, and its session is made while it starts: making it (the Session,
  // its name, its place in the registry: ~40 µs of the daemon's thread) is not on the exec's way
  // to its spawn (docs/benchmarks.md, the exec round trip). Its exit is told by a later turn.
  const started = plan && !p.pty ? startOnPipes({ plan, cwd: req.cwd, env, stdin: p.stdin ?? 'pipe' }) : undefined;
  let wired = false;
  try {
    return launched();
  } catch (err) {
    // Nothing started is left without its session: its group, and whatever of it left the group.
    if (started && !wired) {
      abandon(started);
      cgroup?.kill();
    }
    throw err;
  }

  function launched(): { session: Session; warnings: string[] } {
    const session = new Session({
      ...commandSession(ctx, id, p, cfg),
      scope,
      cwd: req.cwd,
      scratch: { dir, stopFile },
      checkpointKey,
      pastInterrupts: req.approved?.history,
      decision: req.decision,
      shell: req.shell?.name,
    });
    late = session;
    // An upstream or a job that prints a credential's value: its output says the credential's name instead.
    session.scrubOutput(creds.map((c) => ({ find: c.value, put: `[credential ${c.name}]` })));
    if (changes) session.noteChanges(changes);
    if (user) stopFileOwner(session, user);
    ctx.registry.add(session);

    const warnings: string[] = [...(plan?.notes ?? []), ...(opened instanceof Error ? [opened.message] : [])];
    if (channel) void session.finished.then(() => channel.close());
    if (proxy) void session.finished.then(() => proxy.close());
    if (channel || proxy) channelsBySession.set(session, { checkpoint: channel, proxy, ...(proxy && proxyPolicy ? { policy: proxyPolicy } : {}), ...(proxy && creds.length > 0 ? { credentials: creds.map((c) => ({ name: c.name, hosts: [...c.hosts], placeholder: c.placeholder })) } : {}) });
    if (plan) {
      // The job's descriptors and exit are the wiring's from here (it reports a failure of its own through the session).
      wired = true;
      const warning = spawnSession(session, { plan, env, timeoutSec: p.timeout ?? cfg.timeoutSec, killGraceMs: cfg.killGraceMs, pty: p.pty ?? false, cgroup, started });
      if (warning) warnings.push(warning);
      plan.release();
      // The next review session in this workspace finds its overlay mounted.
      if (review !== undefined && !p.pty && ctx.ahead) {
        const { ahead } = ctx;
        setImmediate(() => ahead.prepare(review));
      }
    } else {
      session.finish({ exitCode: null, signal: null, error: `${refused}; nothing ran` });
    }
    channel?.handedOver();
    proxy?.handedOver();
    if (statusFd !== undefined) closeSync(statusFd);
    // Approved: its record replaces the pending one now, so a restart never asks again for what runs.
    ctx.keeper.watch(session, { now: req.approved !== undefined, cgroup: cgroup?.dirs() });
    session.emit('started', { name: session.name, command: session.command, pid: session.pid ?? null, cwd: req.cwd });
    return { session, warnings };
  }
}

/** What a command's session takes from its exec's params and the exec config: its command, output caps and spool, waits and notices. */
export function commandSession(ctx: Pick<LaunchContext, 'registry' | 'state'>, id: string, p: ExecParams, cfg: Config['tools']['exec']) {
  return {
    id,
    command: p.command,
    name: p.name ?? deriveName(p.command),
    key: p.key,
    stdin: p.stdin ?? 'pipe',
    maxOutputChars: cfg.maxOutputChars,
    pendingMaxOutputChars: cfg.pendingMaxOutputChars,
    events: ctx.registry.events,
    spool: cfg.maxLogBytes > 0 ? new Spool(ctx.state.spoolPath(id), cfg.maxLogBytes, ctx.state.disk) : undefined,
    waitFor: p.waitFor && describeWaitFor(p.waitFor),
    notify: p.notify,
  } satisfies Partial<ConstructorParameters<typeof Session>[0]>;
}

/** sandbox.network.upstreamCa's PEM; throws naming the fix. */
function readUpstreamCa(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    throw new Error(`sandbox.network.upstreamCa ${path} cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); make it readable by the daemon, or take upstreamCa out to trust the system's roots`);
  }
  if (!text.includes('-----BEGIN CERTIFICATE-----')) throw new Error(`sandbox.network.upstreamCa ${path} holds no PEM certificate; give the CA's certificate as PEM (-----BEGIN CERTIFICATE-----)`);
  return text;
}

/** The trust bundle in the session's scratch directory (visible inside its sandbox, gone with it). */
function writeBundle(dir: string, pem: string): string {
  const file = join(dir, 'procctl-ca-bundle.pem');
  writeFileSync(file, pem, { mode: 0o644 });
  return file;
}

/** The variables by which curl, git, OpenSSL, Python's requests and Node trust a bundle. */
function trustEnv(file: string): Record<string, string> {
  return { SSL_CERT_FILE: file, NODE_EXTRA_CA_CERTS: file, REQUESTS_CA_BUNDLE: file, CURL_CA_BUNDLE: file, GIT_SSL_CAINFO: file };
}

/** The plan with its overlays joined as made ahead (premount.ts), and the daemon's copies of them closed with the rest. */
function entering(plan: LaunchPlan, enter: Ahead['enter']): LaunchPlan {
  const mounts = plan.steps?.mounts;
  if (!mounts) {
    closeEnter(enter);
    return plan;
  }
  return {
    ...plan,
    steps: { ...plan.steps, mounts: { ...mounts, enter } },
    release: () => {
      plan.release();
      closeEnter(enter);
    },
  };
}

/** Where a review session's changes are kept, under the state directory (hidden in the sandbox). */
export const changesDir = (stateDir: string, id: string) => join(stateDir, 'changes', id);

/** Refuse a session past the scope's maxSessions. */
function roomFor(registry: Registry, scope: string, maxSessions: number): void {
  const running = registry.running(scope).length;
  if (running >= maxSessions) {
    throw limit(`scope "${scope}" already has ${running} running sessions (maxSessions = ${maxSessions}); wait for some to finish or kill them`, {
      running,
      maxSessions,
    });
  }
}
