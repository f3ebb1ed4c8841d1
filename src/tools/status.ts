import { daemonInheritance } from '../policy/env.js';
import { spawnFallbackReason, spawnMethod } from '../runner/native.js';
import { sandboxStatus } from '../sandbox/host.js';
import { bashState } from '../shell/bash.js';
import type { Config } from '../config/schema.js';
import { cgroupStatus } from '../cgroup/host.js';
import { runningUsage, type RunningUsage } from '../runner/cgroup.js';
import type { Daemon } from './context.js';
import { lastVerifyOf } from './audit.js';

/**
 * `daemon.status` (SPEC §4): what the daemon is, what it holds, and how it runs jobs here.
 * Answered at once when nothing it says must be waited for (the review probe and the sandbox's
 * check made, every running session's usage held): some clients ask after every poll, and an
 * answer that is a promise is a request held in flight, in the connection's long-lived map.
 */
export function daemonStatus(d: Daemon, startedAt: number, version: string): Status | Promise<Status> {
  // Read once for all that depends on it: each read of process.env.PATH makes the string anew
  // (a quarter of a kilobyte here), and a status read it five times.
  const path = process.env.PATH;
  // Asked before `state` is read: a review probe the state directory refuses is in its health.
  const review = d.reviewSupport(path);
  const config = d.config();
  const held = configSections(config, path);
  const sandbox = sandboxSection(config, held, path);
  const running = d.cgroups.mode === 'none' ? undefined : runningUsage(d.registry);
  if (review instanceof Promise || sandbox instanceof Promise || running instanceof Promise) {
    return Promise.all([review, sandbox, running]).then(([r, s, t]) => statusOf(d, startedAt, version, r, held.env, s, t));
  }
  return statusOf(d, startedAt, version, review, held.env, sandbox, running);
}

type Status = ReturnType<typeof statusOf>;

function statusOf(
  d: Daemon,
  startedAt: number,
  version: string,
  review: Awaited<ReturnType<Daemon['reviewSupport']>>,
  env: ConfigSections['env'],
  sandbox: SandboxSection,
  running: RunningUsage | undefined,
) {
  // Copied with Object.assign, not spread with `ahead` added: see cgroupStatus (cgroup/host.ts).
  const changes = d.ahead ? Object.assign({}, review, { ahead: d.ahead.status() }) : review;
  return {
    version,
    pid: process.pid,
    uptimeMs: Date.now() - startedAt,
    socket: d.socketPath,
    sessions: d.registry.counts(),
    closing: d.closing,
    node: process.version,
    spawner: spawnMethod(),
    state: { dir: d.state.dir, ...d.state.status() },
    env,
    spawnerReason: spawnFallbackReason(),
    config: d.configStatus(),
    sandbox,
    // The approval rules' bash parser (SPEC §8): a failed load is tried again by the next judged request.
    approvals: { parser: bashState() },
    changes,
    cgroups: cgroupStatus(d.cgroups, running),
    audit: { ...d.trail.status(), ...(lastVerifyOf() ? { lastVerify: lastVerifyOf() } : {}) },
    telemetry: d.telemetryStatus(),
    restarts: { ...d.restarts, lastAt: d.restarts.lastAt === null ? null : new Date(d.restarts.lastAt).toISOString() },
  };
}

/** What `daemon.status` says that follows from the config alone (and PATH, where programs are found). */
interface ConfigSections {
  path: string | undefined;
  env: { withheld: ReturnType<typeof daemonInheritance>['withheld'] };
  /** The sandbox's section as last made: the host's status (sandbox/host.ts) with the config's credentials. */
  sandbox?: { from: SandboxStatus; section: SandboxSection };
}

type SandboxStatus = Awaited<ReturnType<typeof sandboxStatus>>;
type SandboxSection = SandboxStatus & ReturnType<typeof withCredentials>;

/**
 * The sections made once per config: a config is never changed in place (a reload makes a new
 * one), so they are kept by the config object, and made again for a new one or a new PATH.
 * daemon.status is asked after every poll by some clients: the sandbox's section alone was
 * 2.9 kB of keys and copies a call (its check's key written out as JSON twice).
 */
const sections = new WeakMap<Config, ConfigSections>();

function configSections(config: Config, path: string | undefined): ConfigSections {
  let held = sections.get(config);
  if (held === undefined || held.path !== path) {
    held = { path, env: { withheld: daemonInheritance(config.env).withheld } };
    sections.set(config, held);
  }
  return held;
}

/**
 * The sandbox's section: what the host offers (sandbox/host.ts keeps it true, looking at the host
 * again every few seconds and checking again when it changed, off the loop) with what the config
 * names (its credentials), put together again only when the host's status is a new one.
 */
function sandboxSection(config: Config, held: ConfigSections, path: string | undefined): SandboxSection | Promise<SandboxSection> {
  const status = sandboxStatus(config, path);
  return status instanceof Promise ? status.then((s) => sectionOf(config, held, s)) : sectionOf(config, held, status);
}

function sectionOf(config: Config, held: ConfigSections, status: SandboxStatus): SandboxSection {
  if (held.sandbox?.from !== status) held.sandbox = { from: status, section: { ...status, ...withCredentials(config) } };
  return held.sandbox.section;
}

/** `credentials` when the config has any (the sandbox's status is otherwise as it was). */
function withCredentials(config: Config) {
  const credentials = configuredCredentials(config);
  return credentials.length > 0 ? { credentials } : {};
}

/** The credentials the config gives (SPEC §21), and to which scopes: names, hosts and header, never values. */
function configuredCredentials(config: Config) {
  const out: { name: string; hosts: string[]; header: string; variable: string; scopes: string[] | 'all using sandbox.network' }[] = [];
  const add = (network: Config['sandbox']['network'] | undefined, scopes: string[] | undefined) => {
    if (typeof network !== 'object') return;
    for (const c of network.credentials) {
      const to = c.scopes ? (scopes ? scopes.filter((s) => c.scopes!.includes(s)) : c.scopes) : scopes;
      out.push({ name: c.name, hosts: [...c.hosts], header: c.header, variable: `PROCCTL_CRED_${c.name}`, scopes: to ?? 'all using sandbox.network' });
    }
  };
  add(config.sandbox.network, undefined);
  for (const [name, scope] of Object.entries(config.scopes)) add(scope.network, [name]);
  return out;
}
