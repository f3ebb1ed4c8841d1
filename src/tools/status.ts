import { daemonInheritance } from '../policy/env.js';
import { spawnFallbackReason, spawnMethod } from '../runner/native.js';
import { sandboxStatus } from '../sandbox/host.js';
import { bashState } from '../shell/bash.js';
import type { Config } from '../config/schema.js';
import { cgroupStatus } from '../cgroup/host.js';
import { runningUsage, type RunningUsage } from '../runner/cgroup.js';
import type { Daemon } from './context.js';
import { lastVerifyOf } from './audit.js';
import { JsonText } from './json-text.js';

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

/** `daemon.status` as the transport writes it: the status's JSON, kept while only its uptime moves. */
export function daemonStatusAnswer(d: Daemon, startedAt: number, version: string): JsonText | Promise<JsonText> {
  const status = daemonStatus(d, startedAt, version);
  return status instanceof Promise ? status.then((s) => statusAnswer(d, s)) : statusAnswer(d, status);
}

/**
 * The last status answered, by daemon: its JSON either side of the uptime's figure, and that JSON
 * read back (what it says, apart from the live objects it was made from, which may change in place).
 */
interface KeptStatus {
  said: unknown;
  before: string;
  after: string;
}

const keptStatus = new WeakMap<Daemon, KeptStatus>();

const UPTIME_KEY = '"uptimeMs":';

/**
 * A status's JSON. Some clients ask after every poll, and between two asks nothing but the uptime
 * has moved: the answer is then the kept JSON with the uptime written in, the status compared
 * with what it said (no allocation) instead of serialized (2.5 times its size in intermediate
 * strings, most of what a status allocated). When anything else differs, it is serialized and
 * kept anew.
 */
function statusAnswer(d: Daemon, status: Status): JsonText {
  let k = keptStatus.get(d);
  if (k === undefined || !saysSame(k.said, status, 'uptimeMs')) {
    const json = JSON.stringify(status);
    // The first `"uptimeMs":` is the top-level key: it comes third, and a quote inside a string is escaped.
    const at = json.indexOf(UPTIME_KEY) + UPTIME_KEY.length;
    k = { said: JSON.parse(json), before: json.slice(0, at), after: json.slice(at + String(status.uptimeMs).length) };
    keptStatus.set(d, k);
  }
  return new JsonText(k.before + status.uptimeMs + k.after);
}

/**
 * Whether `value` serializes to the JSON `said` was read from, `skip` aside (a top-level key).
 * Plain objects, arrays and primitives are compared; a key whose value JSON leaves out (undefined)
 * counts as absent. Anything else (a Date, a class with toJSON, NaN) counts as different: the
 * status is then serialized afresh, never answered wrong.
 */
export function saysSame(said: unknown, value: unknown, skip?: string): boolean {
  if (said === value) return true;
  if (typeof said !== 'object' || typeof value !== 'object' || said === null || value === null) return false;
  if (Array.isArray(said)) {
    if (!Array.isArray(value) || said.length !== value.length) return false;
    for (let i = 0; i < said.length; i++) if (!saysSame(said[i], value[i])) return false;
    return true;
  }
  if (Array.isArray(value) || Object.getPrototypeOf(value) !== Object.prototype) return false;
  const x = said as Record<string, unknown>;
  const y = value as Record<string, unknown>;
  let keys = 0;
  for (const key in y) {
    if (y[key] === undefined) continue;
    keys++;
    if (key !== skip && (!Object.hasOwn(x, key) || !saysSame(x[key], y[key]))) return false;
  }
  for (const key in x) if (Object.hasOwn(x, key)) keys--;
  return keys === 0;
}

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
