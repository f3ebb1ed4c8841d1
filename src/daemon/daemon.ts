import { ALL_SCOPES } from '../config/schema.js';
import { HeldChanges } from '../changes/held.js';
import { MountsAhead } from '../runner/premount.js';
import { probeReview, type ReviewSupport } from '../sandbox/overlay.js';
import { rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer, Socket, type Server } from 'node:net';
import pino, { type Logger } from 'pino';
import { loadConfig, type LoadedConfig } from '../config/load.js';
import type { Config } from '../config/schema.js';
import { Connection } from '../rpc/connection.js';
import { ClientBudget, type ClientLimits } from '../rpc/limits.js';
import { closeRefused, refuseConnection } from '../rpc/refuse.js';
import { peerOf } from '../transport/peer.js';
import { createMethods } from '../rpc/methods.js';
import { stopSessions } from '../runner/stop.js';
import { setStragglerListener } from '../runner/sweep.js';
import { setSpliceListener } from '../runner/launch/splice.js';
import { setTapListener } from '../runner/launch/tap.js';
import { Registry } from '../session/registry.js';
import type { Daemon } from '../tools/context.js';
import { forget } from '../tools/process/forget.js';
import { InterruptWatcher } from '../interrupt/watcher.js';
import { GuardianLink, type CrashPolicy } from './guardian-link.js';
import { dirname, join } from 'node:path';
import { ScratchDirs } from '../runner/scratch.js';
import { EXIT_STATUS_FILE } from '../runner/spawn.js';
import { Shells } from '../shells/shells.js';
import { listenOnPath } from './socket.js';
import { resolveStateDir, StateStore } from './state.js';
import { Records } from './records.js';
import { approverFile, makeApproverCredential, removeApproverCredential } from './approver.js';
import { Channels } from './channel.js';
import { RememberedStore } from './remembered.js';
import { compileRules } from '../policy/approvals.js';
import { loadBash, onBashLoadFailure } from '../shell/bash.js';
import { restorePending } from '../tools/approval/pending.js';
import { restoreChangesApprovals, settleOnceGone } from '../tools/approval/changes.js';
import { nativeSpawner } from '../runner/native.js';
import { Notifier } from './systemd.js';
import { stdioFiles } from './inherited.js';
import { addonStale } from '../base/addon.js';
import { packageVersion } from '../base/version.js';
import { adoptSessions, reapOldGuardian, type Inherited } from './handover/in.js';
import { crashHandover, guardianSocket, takeFromGuardian } from './handover/crash.js';
import { exec as execImage, prepare as prepareHandover, type HandoverHost } from './handover/out.js';
import type { Restarts } from './handover/schema.js';
import { mark, restartTimeline, type ImageStart } from './handover/timeline.js';
import type { RestartAnswer } from '../tools/context.js';
import { diagnostics, diagnosticsParams } from './diagnostics.js';
import { scopeRules } from '../policy/scopes.js';
import { requireSandbox, trustProbe } from '../sandbox/host.js';
import { hostPrint } from '../sandbox/host-print.js';
import { credentialProblem } from '../sandbox/credentials.js';
import { ProxyCa } from '../netproxy/ca.js';
import { CgroupsAhead } from '../cgroup/ahead.js';
import { closeCgroups, openCgroups, removeUnusedSubtrees, type CgroupLayout } from '../cgroup/host.js';
import { requireLimits } from '../cgroup/limits.js';
import { emptyLeftovers } from '../cgroup/recover.js';
import { cgroupRemovalsSettled } from '../runner/cgroup.js';
import { samplingThread } from '../runner/sample-thread.js';
import { setHelperPriority } from '../runner/helper-priority.js';
import { AuditBus } from '../audit/events.js';
import { auditDir } from '../audit/files.js';
import { AuditTrail } from '../audit/writer.js';
import type { Metrics } from '../metrics/prometheus.js';
import { noteEnded } from '../tools/trail.js';
import { followSession } from '../tools/exec.js';
import { followOf } from '../session/carry.js';
import type { TelemetryStatus } from '../tools/context.js';
import type { OtlpTelemetry } from '../telemetry/otlp.js';

/** The config's per-user budgets of connections and incomplete frames. */
const clientLimits = (c: Config): ClientLimits => ({
  connectionsPerUid: c.rpc.maxConnectionsPerUid,
  partialBytesPerUid: c.rpc.maxPartialBytesPerUid,
  partialFrameTimeoutMs: c.rpc.partialFrameTimeoutMs,
});

export interface DaemonOptions {
  socketPath: string;
  /** Sockets handed over by socket activation (LISTEN_FDS), already checked to be bound to socketPath. */
  listenFds?: number[];
  configFile: string | undefined;
  loaded: LoadedConfig;
  logLevel?: string;
  /** The options it was started with (after the script), for a planned restart's pre-flight. */
  args?: string[];
  /** What the last image of this PID handed over in a planned restart (SPEC §19), or why it could not be read. */
  inherited?: Inherited;
  /** Which image bin/procctld started (logged when listening and with a restart's timeline). */
  image?: ImageStart;
}

/**
 * Whether the OpenTelemetry SDK is loaded in this process (its packages are CommonJS, so they are
 * in the module cache): false unless telemetry is on. The API alone does not count: prom-client
 * loads it when metrics are on, a facade that does nothing without an SDK. Looked up by the SDK
 * packages' entry files (src/telemetry loads the SDK through these, and through nothing else):
 * a walk of the whole cache made a new array of its names at every daemon.status (1.3 kB).
 */
function sdkLoaded(): boolean {
  if (sdkSeen) return true;
  sdkEntries ??= SDK_PACKAGES.flatMap((name) => {
    try {
      return [requireHere.resolve(name)];
    } catch {
      return []; // not installed: it cannot be loaded either
    }
  });
  for (const file of sdkEntries) if (requireHere.cache[file] !== undefined) return (sdkSeen = true);
  return false;
}
/** The SDK's packages src/telemetry loads (otlp.ts, counting.ts). */
const SDK_PACKAGES = ['@opentelemetry/sdk-trace', '@opentelemetry/sdk-metrics', '@opentelemetry/resources', '@opentelemetry/core', '@opentelemetry/exporter-trace-otlp-proto', '@opentelemetry/exporter-metrics-otlp-proto'];
const requireHere = createRequire(import.meta.url);
let sdkEntries: string[] | undefined;
let sdkSeen = false;

/** Why a session that ran when the last daemon crashed is lost (docs/durability.md "A crash keeps the sessions"). */
const CRASH_LOST =
  'the daemon running it died without a hand-over and it was not kept for the next one: durability.onCrash was "kill", the guardian was gone, no daemon came within durability.crashGraceMs, or a crash cannot keep it (younger than ~100 ms, or a kind docs/durability.md names)';

/** How often finished sessions are checked against their TTL. */
const REAP_EVERY_MS = 10_000;
/** How long past the kill grace a shutdown waits for sessions to report their end. */
const SHUTDOWN_MARGIN_MS = 5000;

/** The daemon: config, registry, socket server, and an orderly shutdown. */
export class ProcctlDaemon implements Daemon {
  readonly registry = new Registry();
  readonly log: Logger;
  readonly socketPath: string;
  private readonly listenFds: number[];
  readonly runtimeDir: string;
  readonly scratch: ScratchDirs;
  closing = false;
  restarting = false;
  restarts: Restarts = { planned: 0, crash: 0, lastAt: null, lastMs: null, adopted: 0, lost: 0 };
  private readonly inherited: Inherited | undefined;
  private readonly args: string[];
  private readonly image: ImageStart | undefined;
  /** systemd handed the socket over (the first image's LISTEN_FDS): it owns the file, its mode and its lifetime. */
  private readonly activated: boolean;
  approverMade: string | undefined;
  private current: Config;
  private readonly configFile: string | undefined;
  private loadedFrom: string | undefined;
  /** How the last SIGHUP reload went (daemon.status.config). */
  private lastReload: { at: number; ok: true } | { at: number; ok: false; error: string } | undefined;
  private readonly server: Server;
  private readonly connections = new Set<Connection>();
  private readonly budget: ClientBudget;
  private reaper: NodeJS.Timeout | undefined;
  private readonly startedAt = Date.now();
  /** The version this image started as: the package on disk may be replaced under it (an upgrade). */
  private readonly version = packageVersion();
  private readonly guardian: GuardianLink;
  private readonly interrupts: InterruptWatcher;
  readonly shells: Shells;
  private readonly notifier: Notifier;
  readonly state: StateStore;
  readonly keeper: Records;
  readonly channels: Channels;
  readonly remembered: RememberedStore;
  /** The changes review sessions hold (SPEC §16), under the state directory. */
  readonly held: HeldChanges;
  /** Review sessions' overlays mounted ahead of their exec (runner/premount.ts). */
  readonly ahead: MountsAhead;
  /** Where sessions' cgroups go (SPEC §15): found at start, "none" until then. */
  cgroups: CgroupLayout;
  /** Session cgroups made ahead of their execs (cgroup/ahead.ts): once the cgroups are found. */
  cgroupsAhead: CgroupsAhead | undefined;
  private statusTimer: NodeJS.Timeout | undefined;
  /** What happened, told to the audit trail and the metrics (SPEC §18). */
  readonly audit = new AuditBus();
  readonly trail: AuditTrail;
  private metrics: Metrics | undefined;
  /** The OpenTelemetry export, when `telemetry.otlp.endpoint` is set: the SDK is loaded only then. */
  private telemetry: OtlpTelemetry | undefined;

  constructor(opts: DaemonOptions) {
    this.current = opts.loaded.config;
    compileRules(this.current.approvals.rules);
    this.configFile = opts.configFile;
    this.loadedFrom = opts.loaded.file;
    this.socketPath = opts.socketPath;
    this.inherited = opts.inherited;
    this.args = opts.args ?? [];
    this.image = opts.image;
    // A planned restart: the socket the last image listened on, kept open all along (SPEC §19).
    const kept = opts.inherited && ('handover' in opts.inherited ? opts.inherited.handover.listen.fd : opts.inherited.listenFd);
    this.listenFds = kept !== undefined ? [kept] : (opts.listenFds ?? []);
    this.activated = opts.inherited && 'handover' in opts.inherited ? opts.inherited.handover.listen.activated : kept === undefined && this.listenFds.length > 0;
    if (opts.inherited && 'handover' in opts.inherited) {
      this.restarts = { ...opts.inherited.handover.restarts };
      this.approverMade = opts.inherited.handover.approver;
    }
    // Scratch directories of sessions, beside the socket and named after it, so nothing else is touched.
    this.runtimeDir = `${opts.socketPath}.d`;
    // A sandboxed job's status file (bwrap's --json-status-fd) is made with the spare directories, while sessions are sandboxed.
    this.scratch = new ScratchDirs(join(this.runtimeDir, 'sessions'), () => (this.current.sandbox.mode === 'off' ? undefined : EXIT_STATUS_FILE));
    this.log = pino({ level: opts.logLevel ?? this.current.log.level, base: { pid: process.pid } });
    this.notifier = new Notifier(this.log);
    this.state = new StateStore(resolveStateDir(this.current.stateDir), this.log);
    this.held = new HeldChanges(this.state.dir);
    this.ahead = new MountsAhead(this.held);
    this.trail = new AuditTrail(auditDir(this.state.dir), this.current.audit, this.log);
    this.guardian = new GuardianLink(this.log);
    this.budget = new ClientBudget(clientLimits(this.current));
    this.keeper = new Records(this.state, this.registry, this.guardian, this.log);
    this.channels = new Channels(this, this.log, () => this.proxyCa());
    this.remembered = new RememberedStore(this.state.dir, this.log);
    this.interrupts = new InterruptWatcher(this.registry, () => this.current, this.log);
    this.shells = new Shells(this, (msg, err) => this.log.warn({ err }, msg));
    this.cgroups = openCgroups({ mode: 'off' }, this.state.dir);
    setStragglerListener((sessionId, pids) =>
      this.log.warn({ sessionId, pids }, 'a finished session left processes outside its group; stopping them'),
    );
    setSpliceListener((file, reason) => this.log.warn({ file, reason }, "the state directory's file system refused splice: this session's output is read and written as before (a crash can lose what was read and not yet written)"));
    setTapListener((level, sessionId, message, fields) => this.log[level]({ sessionId, ...fields }, message));
    const methods = createMethods(this, this.startedAt, this.version);
    methods.set('daemon.diagnostics', (params) => diagnostics(diagnosticsParams(params)));
    // A client that half-closes (`socat`, `nc -N`) still gets its answers.
    this.server = createServer({ allowHalfOpen: true }, (socket) => {
      // Who connects (SO_PEERCRED): each user has a budget of connections and of incomplete frames.
      const peer = peerOf(socket);
      const uid = 'uid' in peer ? peer.uid : -1;
      const slot = this.budget.admit(uid);
      if (!slot) {
        const why = `uid ${uid} already has ${this.budget.limits.connectionsPerUid} connections open (rpc.maxConnectionsPerUid); close some and retry`;
        this.log.warn({ peer }, `refused a connection: ${why}`);
        refuseConnection(socket, `${JSON.stringify({ jsonrpc: '2.0', id: null, error: { code: -32000, message: why, data: { kind: 'limit' } } })}\n`);
        return;
      }
      // Its slot is given back at its close, or at once if it is refused for its incomplete frames (rpc/connection.ts).
      const conn = new Connection(socket, methods, this.current.rpc.maxFrameBytes, this.log, { of: this.budget, uid, slot });
      this.connections.add(conn);
      socket.on('close', () => {
        this.connections.delete(conn);
        slot.release();
      });
    });
  }

  config(): Config {
    return this.current;
  }

  private review: { found: ReviewSupport; print: string } | undefined;
  private reviewProbe: Promise<ReviewSupport> | undefined;

  /**
   * Whether review mode can run here: tried for real the first time it is asked, on the state
   * directory's file system, off the daemon's thread (asks meanwhile wait for the same probe), and
   * again once the host changed (sandbox/host-print.ts: unshare or mount installed, upgraded or
   * removed, a user-namespace sysctl). A state directory that refuses the probe's directory says
   * review is unavailable and why (it is where held changes go), is told to the state's health
   * like any write there, and the probe is tried again at the next ask: `daemon.status` always answers.
   */
  reviewSupport(path = process.env.PATH): ReviewSupport | Promise<ReviewSupport> {
    const print = hostPrint(path);
    if (this.review?.print === print) return this.review.found;
    this.reviewProbe ??= probeReview(this.state.dir).then((found) => {
      this.reviewProbe = undefined;
      if (found.stateRefused) {
        this.state.disk.failed('dir', found.stateRefused, 'the review probe\'s directory');
        return { review: false, reason: found.reason };
      }
      this.state.disk.succeeded('dir');
      this.review = { found, print };
      return found;
    });
    return this.reviewProbe;
  }

  /** The daemon's own paths, hidden from a sandboxed job (SPEC §12): its socket and runtime directory, the log a detached start writes beside them, its approver credential, state directory, config file, and the files behind its stdout and stderr. */
  controls(): string[] {
    const paths = [this.socketPath, this.runtimeDir, approverFile(this.socketPath), join(dirname(this.socketPath), 'procctld.log'), this.state.dir];
    if (this.loadedFrom) paths.push(this.loadedFrom);
    for (const file of stdioFiles()) if (!paths.includes(file)) paths.push(file);
    return paths;
  }

  /**
   * The proxy's CA (SPEC §21), under `<state>/ca/`: opened (made, the first time) at the start when
   * the config has credentials, else when a reload brings the first; undefined if it cannot be made.
   */
  proxyCa(): ProxyCa | undefined {
    if (this.ca === undefined) {
      try {
        this.ca = ProxyCa.open(join(this.state.dir, 'ca'));
      } catch (err) {
        this.ca = null;
        this.log.error({ err: (err as Error).message }, 'the proxy\'s CA cannot be made under the state directory: sessions with credentials will not start');
      }
    }
    return this.ca ?? undefined;
  }

  private ca: ProxyCa | null | undefined;

  /** What jobs with credentials trust: the system's roots and the proxy's CA (LaunchContext). */
  trustBundle(): string | undefined {
    return this.proxyCa()?.trustBundle();
  }

  async start(): Promise<void> {
    // A planned restart: the old image has just checked this config's sandbox; bwrap is not run again for it.
    const checked = this.inherited && 'handover' in this.inherited ? this.inherited.handover.checked?.sandbox : undefined;
    if (checked !== undefined) trustProbe(checked);
    // And review mode's probe, by an image of this version on this host as it is now: not mounted again.
    const review = this.inherited && 'handover' in this.inherited ? this.inherited.handover.checked?.review : undefined;
    if (review && review.version === this.version) {
      const { version: _, print, ...found } = review;
      this.review = { found, print };
    }
    // A sandbox or limits the config asks for and this host cannot give: refuse, never run unconfined.
    requireSandbox(this.current);
    requireCredentials(this.current);
    // The state directory is this daemon's before its cgroup subtrees (named after it) are made or
    // taken: the guardian of a crashed run on it removes them only while no daemon holds it.
    this.state.init(this.socketPath);
    this.cgroups = openCgroups(this.current.cgroups, this.state.dir);
    this.cgroupsAhead = new CgroupsAhead(this.cgroups, () => this.registry.newId(), (id) => this.registry.has(id));
    // Not on a planned restart: the sessions handed over may have their cgroups there (the mode or
    // root changed across it), empty ones too (a session whose processes exited, its leader a zombie
    // while reaping is frozen), which adopt() still reads the final usage of. The next cold start removes them.
    const planned = this.inherited !== undefined && 'handover' in this.inherited;
    // The helper threads' priority follows from where the sessions run (runner/helper-priority.ts).
    setHelperPriority(this.cgroups.controllers.cpu !== null);
    const unused = planned ? [] : removeUnusedSubtrees(this.cgroups, this.state.dir);
    if (unused.length > 0) this.log.info({ removed: unused }, 'removed the cgroup subtrees a run before left where this one makes none');
    requireLimits(this.cgroups, this.current);
    if (hasCredentials(this.current)) this.proxyCa();
    // The trail is open before recovery, so the end of a session a crash lost is on record.
    this.trail.open(this.audit);
    if (this.current.metrics.listen !== undefined) {
      // prom-client (and the OpenTelemetry API it loads) only when metrics are on: a daemon
      // without them does not pay for reading and compiling them at every start.
      const { Metrics } = await import('../metrics/prometheus.js');
      this.metrics = new Metrics(this.registry, this.audit);
      await this.metrics.listen(this.current.metrics.listen, this.log);
    }
    const otlp = this.current.telemetry.otlp;
    if (otlp.endpoint !== undefined) {
      const { OtlpTelemetry } = await import('../telemetry/otlp.js').catch((err: Error) => {
        throw new Error(`telemetry.otlp.endpoint is set but the OpenTelemetry SDK could not be loaded (${err.message}): reinstall procctl, or leave telemetry.otlp.endpoint out`);
      });
      this.telemetry = new OtlpTelemetry({ ...otlp, endpoint: otlp.endpoint }, this.registry, this.audit, packageVersion(), this.log);
    }
    this.remembered.load();
    mark('setup');
    const handover = this.inherited && 'handover' in this.inherited ? this.inherited.handover : undefined;
    const roots = [this.cgroups.v2, ...Object.values(this.cgroups.v1)].filter((d): d is string => d !== undefined);
    const tidy = { made: this.cgroups.made, lock: this.state.lockPath() };
    // The guardian watches every session adopted: the last image's goes on, else one is started first.
    if (handover && !handover.guardian) this.guardian.start(this.runtimeDir, roots, this.crashPolicy(), tidy);
    // A planned restart: the sessions handed over run on here, before any client is served and
    // before recovery, which finds the record of any that could not be taken back and ends it as lost.
    // After a crash, the guardian of the crashed run may hold its sessions (durability.onCrash "keep"): the same.
    const taken = this.inherited ? [] : takeFromGuardian(this.state.dir, this.log);
    if (taken.length > 0) this.guardian.start(this.runtimeDir, roots, this.crashPolicy(), tidy);
    const crashed = taken.length > 0 ? this.adoptCrashed(taken) : undefined;
    const handed = handover ? this.adopt(handover) : (crashed?.adopted ?? new Set<string>());
    // Review shells have no process for the guardian to keep: after a crash they come back from where they were written down (docs/shells.md).
    if (!this.inherited) {
      const keep = this.current.durability.onCrash === 'keep';
      for (const id of this.shells.takeBackReview(keep, (s) => followSession(this, s, followOf(s)), (msg, err) => this.log.warn({ err }, msg))) handed.add(id);
    }
    const lostWhy = this.inherited && 'problem' in this.inherited ? `this daemon image could not take it over in a planned restart: ${this.inherited.problem}` : undefined;
    if (lostWhy) this.log.error({ problem: lostWhy }, 'restart: the hand-over could not be read; the sessions it held are stopped as lost');
    const oldGuardian = this.inherited && 'problem' in this.inherited ? this.inherited.guardianPid : undefined;
    if (oldGuardian !== undefined) reapOldGuardian(oldGuardian, this.log);
    mark('adopt');
    // A record that says it ran, with no hand-over: its daemon crashed, and nothing kept it for this one.
    const crashWhy = this.inherited ? undefined : (id: string) => crashed?.unfit.get(id) ?? CRASH_LOST;
    const ending = this.keeper.recover(this.current, (s) => restorePending(this, s), { adopted: handed, lostWhy: lostWhy ?? crashWhy, spare: crashed?.shells });
    // Changes held for review survive a restart: a job the restart ended is settled like any other;
    // one a planned restart handed over is still running, its overlay still the job's.
    this.held.load((id, summary) => {
      const s = this.registry.find(ALL_SCOPES, id);
      if (s) return s.noteChanges(summary);
      // A review whose session is gone (its record lost, or forgotten while the daemon died): what
      // nobody has to decide goes; changes still pending are kept and said, never dropped unseen.
      if (!summary.pending) return this.held.remove(id);
      this.log.warn({ sessionId: id, dir: this.held.dirOf(id), files: summary.files, bytes: summary.bytes }, 'changes held for review belong to no session any more: kept; copy what you need from its upper directory, then remove the directory');
    }, (id) => ending.has(id) || handed.has(id));
    // A review whose job outlived the last run is settled once the job is gone, not while it may still write.
    for (const [id, gone] of ending) {
      const s = this.registry.find(ALL_SCOPES, id);
      if (s?.changes?.state === 'running') settleOnceGone(this, s, gone);
    }
    // Changes that wait for a person's answer still do (SPEC §16): the question comes back with them.
    restoreChangesApprovals(this);
    // Sessions this start found lost (running when the last run died) ended now: on record.
    for (const s of this.registry.all()) if (s.reason === 'lost' && (s.endedAt ?? 0) >= this.startedAt) noteEnded(this, s);
    if (!handover && !lostWhy) {
      const lost = [...this.registry.all()].filter((s) => s.reason === 'lost' && (s.endedAt ?? 0) >= this.startedAt).length;
      if (lost > 0 || taken.length > 0) this.restarts = { ...this.restarts, crash: this.restarts.crash + 1, lastAt: Date.now(), lost: this.restarts.lost + lost };
    }
    if (lostWhy) this.restarts = { ...this.restarts, planned: this.restarts.planned + 1, lastAt: Date.now(), lost: this.restarts.lost + [...this.registry.all()].filter((s) => s.reason === 'lost' && (s.endedAt ?? 0) >= this.startedAt).length };
    mark('recover');
    const fds = this.listenFds;
    // The approver credential exists before the first client can connect (a client may read it at once).
    if (fds.length > 0) {
      // Socket activation: systemd owns the socket file, its mode and its lifetime.
      this.refreshApprover();
      await new Promise<void>((resolve, reject) => {
        this.server.once('error', reject);
        this.server.listen({ fd: fds[0] }, () => resolve());
      });
    } else {
      await listenOnPath(this.server, this.socketPath, () => this.refreshApprover());
    }
    // Clients that connected while the last image handed over: their requests are answered here.
    for (const fd of handover?.clients ?? []) this.server.emit('connection', new Socket({ fd, readable: true, writable: true, allowHalfOpen: true }));
    mark('listen');
    // Serving: the sessions a planned restart handed over get their records and the guardian's
    // copies again, a slice a turn; then the approval rules' parser (SPEC §8) is loaded, its
    // WebAssembly compiled on V8's threads, not while the image starts (two cores): a command
    // judged before then waits for it.
    // A failed load is logged each time (the next judged request tries again, SPEC §8).
    onBashLoadFailure((err) => this.log.error({ err: err.message }, 'the approval rules cannot judge commands: the bash parser did not load; the next command they judge tries again'));
    setImmediate(() => this.keeper.afterServing(() => void loadBash().catch(() => undefined)));
    // Where the restart's time went, step by step (docs/durability.md "Where a restart's time goes").
    // With the resident memory at this point: every page the new image made before it served was paid for.
    if (handover) this.log.info({ ...restartTimeline(handover.from), image: this.image, rssMB: Math.round(process.memoryUsage.rss() / 104857.6) / 10 }, 'restart: serving again');
    // Now that this daemon holds its state directory and socket, its subtree is its own: what a
    // crashed run left goes. They are listed before any request is read, so no new session is among them.
    const leftovers = emptyLeftovers(this.cgroups, 5000, handed);
    if (!handover && taken.length === 0) this.guardian.start(this.runtimeDir, roots, this.crashPolicy(), tidy);
    this.interrupts.start();
    this.scratch.refill();
    // After the leftovers were listed: what is made from now on is this run's.
    this.cgroupsAhead?.refill();
    this.notifier.send({ READY: '1', STATUS: this.statusLine(), MAINPID: String(process.pid) });
    if (this.notifier.enabled) {
      this.statusTimer = setInterval(() => this.notifier.send({ STATUS: this.statusLine() }), 5000);
      this.statusTimer.unref();
    }
    this.reaper = setInterval(() => this.reap(), REAP_EVERY_MS);
    this.reaper.unref();
    this.log.info({ socket: this.socketPath, config: this.loadedFrom ?? null, stateDir: this.state.dir, cgroups: this.cgroups.mode, image: this.image }, 'procctld listening');
    void leftovers.then(({ sessions: found, held, stuck }) => {
      // Cgroups a run made ahead for sessions it never started (cgroup/ahead.ts) are empty and no
      // session's record names them: removed without a word. One that held a process is told.
      const sessions = found.filter((id) => held.includes(id) || this.registry.has(id));
      if (sessions.length) this.log.warn({ sessions, stuck }, 'emptied and removed the cgroups of sessions a previous run left');
      if (stuck.length) this.log.error({ stuck }, 'these cgroups of a previous run could not be removed');
    });
    this.warnPlainTokens();
    const spawner = nativeSpawner();
    if (spawner instanceof Error && process.env.PROCCTL_SPAWN !== 'node') {
      this.log.warn({ reason: spawner.message }, `jobs start through fork, which costs more as the daemon grows: ${spawner.message}`);
    }
    const stale = addonStale();
    if (stale) this.log.warn({ reason: stale }, `the native addon is stale: ${stale}`);
  }

  /** The sessions a planned restart handed to this image, taken back (SPEC §19), counted and on record. */
  private adopt(h: NonNullable<Extract<Inherited, { handover: unknown }>['handover']>): Set<string> {
    const { adopted, lost } = adoptSessions({ daemon: this, registry: this.registry, log: this.log, config: () => this.current, state: this.state, keeper: this.keeper, guardian: this.guardian, cgroups: this.cgroups }, h);
    // The persistent shells go on (SPEC §20), their running commands with them.
    const commands = this.shells.adopt(h.shells, (s) => followSession(this, s, followOf(s)), (msg, err) => this.log.error({ err }, msg));
    const now = Date.now();
    const to = this.version;
    this.restarts = { ...this.restarts, planned: this.restarts.planned + 1, lastAt: now, lastMs: now - h.from.at, adopted: this.restarts.adopted + adopted.length, lost: this.restarts.lost + lost.length };
    this.audit.emit({ type: 'restart', kind: 'planned', from: h.from.version, to, adopted: adopted.length, lost: lost.length, ms: now - h.from.at });
    this.log.info({ from: h.from.version, to, adopted: adopted.length, lost: lost.length, ms: now - h.from.at }, 'restart: this image took over the running sessions');
    return new Set([...adopted.map((s) => s.id), ...commands]);
  }

  /** What the guardian does when this daemon dies without a goodbye (config `durability`). */
  private crashPolicy(): CrashPolicy {
    return { ...this.current.durability, socket: guardianSocket(this.state.dir) };
  }

  /**
   * The sessions a crashed run's guardian kept (SPEC §19), taken back through the planned
   * restart's adoption; each record says `adopted: "crash"`.
   */
  private adoptCrashed(taken: ReturnType<typeof takeFromGuardian>): { adopted: Set<string>; unfit: Map<string, string>; shells: Set<number> } {
    const h = crashHandover(taken, this.state, this.current, this.log);
    const { adopted, lost } = adoptSessions({ daemon: this, registry: this.registry, log: this.log, config: () => this.current, state: this.state, keeper: this.keeper, guardian: this.guardian, cgroups: this.cgroups }, h);
    // The persistent shells too (SPEC §20), with the command each ran (docs/shells.md).
    const commands = this.shells.adopt(h.shells, (s) => followSession(this, s, followOf(s)), (msg, err) => this.log.error({ err }, msg), true);
    for (const l of h.lostShells) this.shells.noteLost(l.scope, l.name, l.why);
    const shells = new Set(h.shells.map((e) => e.box?.job.ends.pid).filter((p): p is number => p !== undefined));
    this.restarts = { ...this.restarts, adopted: this.restarts.adopted + adopted.length, lost: this.restarts.lost + lost.length };
    this.audit.emit({ type: 'restart', kind: 'crash', from: 'unknown', to: this.version, adopted: adopted.length, lost: lost.length, ms: 0 });
    this.log.warn({ adopted: adopted.length, lost: lost.length, shells: this.shells.size }, 'crash: this daemon took over the sessions the last one left running');
    return { adopted: new Set([...adopted.map((s) => s.id), ...commands]), unfit: h.unfit, shells };
  }

  /**
   * A planned restart (SPEC §19): prepare the hand-over (refusing, with the old image serving on,
   * when a step cannot be done), answer, then replace the image on the next turn, once the answer
   * is written. A failure at that last step is logged, and this image goes on serving.
   */
  async restart(): Promise<RestartAnswer> {
    const host = this.handoverHost();
    const prepared = await prepareHandover(host);
    setImmediate(() => {
      const failed = execImage(host, prepared);
      this.notifier.send({ STATUS: `restart failed: ${failed.message}` });
    });
    return { sessions: prepared.sessions.length, from: prepared.from, to: prepared.to };
  }

  private handoverHost(): HandoverHost {
    const d = this;
    return {
      log: this.log,
      version: this.version,
      runtimeDir: this.runtimeDir,
      // A persistent shell's running command goes with its shell (shells below), not as a job of its own.
      running: () => this.registry.running().filter((s) => !this.shells.carriesCommand(s)),
      shells: this.shells,
      get restarting() {
        return d.restarting;
      },
      set restarting(on: boolean) {
        d.restarting = on;
      },
      get closing() {
        return d.closing;
      },
      listening: () => {
        const fd = (this.server as unknown as { _handle?: { fd?: number } })._handle?.fd;
        return typeof fd === 'number' && fd >= 0 ? { fd, activated: this.activated } : undefined;
      },
      holdClients: () => {
        // Accepted as ever, but not served: each waits, unread, for the next image (or for resume).
        const handle = (this.server as unknown as { _handle?: { onconnection: (err: number, client?: { fd: number }) => void } })._handle;
        const held: { fd: number }[] = [];
        if (!handle) return { clients: () => [], resume: () => undefined };
        const serve = handle.onconnection;
        handle.onconnection = (err, client) => {
          if (!err && client) held.push(client);
        };
        return {
          clients: () => held.map((c) => c.fd).filter((fd) => fd >= 0),
          resume: () => {
            handle.onconnection = serve;
            for (const client of held.splice(0)) serve.call(handle, 0, client);
          },
        };
      },
      guardian: () => this.guardian.handOver(),
      reviewChecked: () => this.review && { print: this.review.print, review: this.review.found.review, ...(this.review.found.how ? { how: this.review.found.how } : {}), ...(this.review.found.reason !== undefined ? { reason: this.review.found.reason } : {}) },
      notifyEnv: () => this.notifier.handOn(),
      args: this.args,
      configFile: this.configFile,
      stateDir: this.state.dir,
      restarts: this.restarts,
      approverMade: this.approverMade,
      settleFiles: async (records) => {
        // An apply, discard or undo under way finishes (on the changes' thread) before the image goes.
        await this.held.settled();
        for (const r of records) this.state.save(r);
        this.state.flush();
        await this.trail.flushed();
      },
      abandonClients: (err) => {
        const resumes = [...this.connections].map((c) => c.abandon(err));
        return () => {
          for (const resume of resumes) resume();
        };
      },
      flushClients: async () => {
        await Promise.all([...this.connections].map((c) => c.flushed()));
      },
    };
  }

  telemetryStatus(): TelemetryStatus {
    return this.telemetry?.status() ?? { endpoint: null, sdk: sdkLoaded(), exported: 0, dropped: 0, metrics: { exported: 0, dropped: 0 }, lastError: null };
  }

  /** Without approvals.approverToken in the config, the daemon makes the approver credential (SPEC §8). */
  private refreshApprover(): void {
    if (scopeRules(this.current).hasApproverToken) {
      if (this.approverMade !== undefined) removeApproverCredential(this.socketPath);
      this.approverMade = undefined;
    } else {
      this.approverMade ??= makeApproverCredential(this.socketPath);
    }
  }

  private statusLine(): string {
    const { running, finished } = this.registry.counts();
    return `${running} running, ${finished} finished sessions`;
  }

  /** Forget finished sessions older than their TTL; one whose record cannot be deleted waits for the next round. */
  reap(now = Date.now()): void {
    const ttl = this.current.tools.exec.cleanupMs;
    for (const s of this.registry.expired(now, ttl)) {
      // Changes held for review wait for a person, however long: the TTL does not drop them (nor
      // those of a review still being settled, which may be pending in a moment).
      if (s.changes?.pending || s.settling) continue;
      try {
        forget(this, s);
      } catch {
        // the state directory refuses: said once by its health, tried again next round
      }
    }
  }

  /** Tokens should be stored as their hash: a config file that leaks then gives nothing away. */
  private warnPlainTokens(): void {
    const keys = scopeRules(this.current).plainTokens();
    if (keys.length > 0) {
      this.log.warn({ keys }, 'these tokens are stored in plain text in the config: store "sha256:" and the hex sha256 of each instead (printf %s TOKEN | sha256sum)');
    }
  }

  /** Re-read the config file; an invalid one is rejected and the old one kept. */
  reload(): void {
    try {
      const loaded = loadConfig(this.configFile);
      const next = loaded.config;
      if (next.rpc.maxFrameBytes !== this.current.rpc.maxFrameBytes) {
        this.log.warn('rpc.maxFrameBytes changed: it applies to new connections only');
      }
      if (next.log.level !== this.current.log.level) this.log.level = next.log.level;
      compileRules(next.approvals.rules);
      requireSandbox(next);
      requireCredentials(next);
      requireLimits(this.cgroups, next);
      if (JSON.stringify(next.cgroups) !== JSON.stringify(this.current.cgroups)) {
        this.log.warn('cgroups.mode and cgroups.root changed: they apply after a restart');
      }
      if (next.audit.enabled !== this.current.audit.enabled || next.metrics.listen !== this.current.metrics.listen) {
        this.log.warn('audit.enabled and metrics.listen changed: they apply after a restart');
      }
      if (JSON.stringify(next.telemetry) !== JSON.stringify(this.current.telemetry)) {
        this.log.warn('telemetry.otlp changed: it applies after a restart');
      }
      this.trail.setLimits(next.audit);
      this.current = next;
      this.budget.limits = clientLimits(next);
      this.refreshApprover();
      this.loadedFrom = loaded.file;
      this.lastReload = { at: Date.now(), ok: true };
      this.warnPlainTokens();
      this.log.info('config reloaded: caps, TTL, timeouts, interrupt settings and rules apply to new work; the socket path needs a restart');
      this.notifier.send({ STATUS: `config reloaded; ${this.statusLine()}` });
    } catch (err) {
      this.lastReload = { at: Date.now(), ok: false, error: (err as Error).message };
      this.log.error({ err: (err as Error).message }, 'config reload rejected; keeping the previous config');
    }
  }

  /** The config file in use (null: none, the defaults and the environment) and how the last reload went. */
  configStatus(): { file: string | null; lastReload?: { at: string; ok: boolean; error?: string } } {
    const r = this.lastReload;
    return { file: this.loadedFrom ?? null, ...(r ? { lastReload: { at: new Date(r.at).toISOString(), ok: r.ok, ...(r.ok ? {} : { error: r.error }) } } : {}) };
  }

  /** Stop accepting, stop every running session (signal, grace, SIGKILL), close clients. */
  private stopping: Promise<void> | undefined;

  shutdown(signal: string): Promise<void> {
    this.stopping ??= this.stopAll(signal);
    return this.stopping;
  }

  private async stopAll(signal: string): Promise<void> {
    this.closing = true;
    const running = this.registry.running();
    this.log.info({ signal, running: running.length }, 'shutting down');
    this.notifier.send({ STOPPING: '1', STATUS: `stopping ${running.length} running sessions` });
    clearInterval(this.statusTimer);
    clearInterval(this.reaper);
    this.interrupts.stop();
    this.ahead.close();
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    const grace = this.current.tools.exec.killGraceMs;
    // Nothing may hold the shutdown forever: a session whose end is not known by the grace plus
    // a margin (its processes have had SIGKILL by then) is named in the log, and the daemon exits.
    let deadline: NodeJS.Timeout | undefined;
    const stopped = await Promise.race([
      Promise.all([stopSessions(running, { reason: 'shutdown', signal: 'SIGTERM', graceMs: grace }), this.shells.closeAll()]).then(() => true),
      new Promise<false>((resolve) => (deadline = setTimeout(() => resolve(false), grace + SHUTDOWN_MARGIN_MS))),
    ]);
    clearTimeout(deadline);
    if (!stopped) {
      const unfinished = running.filter((s) => s.running).map((s) => ({ sessionId: s.id, pid: s.pid }));
      this.log.error({ unfinished }, 'shutdown: these sessions did not report their end within the grace; exiting without their final records');
    }
    await Promise.all(running.map((s) => s.spool?.close()));
    // An apply, discard or undo under way is never cut short: its manifest is what undo reads.
    const unfinishedReviews = await this.held.close(REVIEW_WORK_DEADLINE_MS);
    if (unfinishedReviews.length > 0) this.log.error({ sessionIds: unfinishedReviews }, 'shutdown: the changes of these review sessions were still being read or written after a minute; exiting, which cuts that short: check their workspaces, and undo may not know all an apply did');
    for (const c of this.connections) c.socket.end();
    closeRefused();
    setTimeout(() => {
      for (const c of this.connections) c.socket.destroy();
    }, 200).unref();
    await closed;
    this.guardian.stop();
    // The samplers' thread (runner/sample-thread.ts) ends with the sessions it read for.
    samplingThread.close();
    await cgroupRemovalsSettled();
    await this.cgroupsAhead?.close();
    closeCgroups(this.cgroups);
    await this.metrics?.close();
    await this.telemetry?.shutdown();
    await this.trail.shutdown();
    this.state.flush();
    this.state.close();
    this.state.release();
    this.notifier.close();
    rmSync(this.runtimeDir, { recursive: true, force: true });
    // A socket kept through a restart was bound by an earlier image: its file is this daemon's to remove.
    if (this.inherited && !this.activated) rmSync(this.socketPath, { force: true });
    if (this.approverMade !== undefined) removeApproverCredential(this.socketPath);
    this.log.info('stopped');
  }
}

/** How long a shutdown waits for an apply, discard or undo under way (a workspace on a file system that hangs must not hold it forever). */
const REVIEW_WORK_DEADLINE_MS = 60_000;

/** A credential whose value cannot be read now refuses the start (or the reload), naming it and the fix. */
function requireCredentials(config: Config): void {
  const problem = credentialProblem(config);
  if (problem) throw new Error(`sandbox.network.credentials: ${problem}`);
}

/** Does any network of the config carry credentials (SPEC §21)? */
function hasCredentials(config: Config): boolean {
  return [config.sandbox.network, ...Object.values(config.scopes).map((s) => s.network)].some((n) => typeof n === 'object' && n.credentials.length > 0);
}
