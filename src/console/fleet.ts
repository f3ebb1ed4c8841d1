import { operatorCredentials, operatorFix } from '../rpc/credential.js';
import { dialFor, hostOf } from '../remote/reach.js';
import { parseSshTarget } from '../remote/target.js';
import type { Dial } from '../transport/dial.js';
import { DaemonLink, type Viewer } from './live.js';
import type { OperatorCredentials as Operator } from '../rpc/credential.js';

/** One daemon of the console: its name in the page, and how to reach it. */
export interface HostSpec {
  /** Shown in each of its rows; `[A-Za-z0-9._:@-]`, unique in the fleet. */
  name: string;
  /** `ssh://…` for another host; undefined for the local daemon (at `--socket`, else the default socket). */
  ssh?: string;
}

/** The word that names the local daemon in `procctl ui --host`. */
export const LOCAL = 'local';
const NAME = /^[A-Za-z0-9][A-Za-z0-9._:@-]{0,63}$/;

/** The name an ssh address gets by default: its host, and its port when one is given. */
function sshName(url: string): string {
  const t = parseSshTarget(url);
  const host = t.host.includes(':') ? `[${t.host}]` : t.host;
  return t.port !== undefined ? `${host}:${t.port}` : host;
}

/**
 * `procctl ui --host V …` (repeatable): each V is `local`, `ssh://[user@]host[:port]`, or either
 * with a name in front (`NAME=ssh://…`). The error says which value is wrong and why.
 */
export function parseHosts(values: readonly string[]): HostSpec[] {
  const specs: HostSpec[] = [];
  for (const value of values) {
    const eq = /^([^=:/]+)=(.*)$/.exec(value);
    const where = eq ? eq[2] : value;
    const ssh = where === LOCAL ? undefined : where;
    if (ssh !== undefined) {
      try {
        parseSshTarget(ssh);
      } catch (err) {
        throw new Error(`--host ${value}: ${(err as Error).message}, or as "${LOCAL}" for this host's daemon (--socket), with NAME= in front to name it`);
      }
    }
    const name = eq ? eq[1] : ssh === undefined ? LOCAL : sshName(ssh);
    if (!NAME.test(name)) throw new Error(`--host ${value}: the name "${name}" may hold letters, digits and . _ : @ - (at most 64)`);
    if (specs.some((s) => s.name === name)) throw new Error(`--host ${value}: the name "${name}" is given twice; name one of them with NAME=`);
    specs.push({ name, ...(ssh !== undefined ? { ssh } : {}) });
  }
  return specs;
}

/** The one host of `procctl [--host ssh://…] ui` (or $PROCCTL_HOST), as the fleet of one it is. */
export function singleHost(host: string | undefined, env: NodeJS.ProcessEnv): HostSpec {
  const ssh = hostOf({ host, env });
  return ssh === undefined ? { name: LOCAL } : { name: sshName(ssh), ssh };
}

/** `web-1` → `WEB_1`: the suffix of a host's own credential variables. */
export function envSuffix(name: string): string {
  return name.toUpperCase().replace(/[^A-Z0-9]/g, '_');
}

export interface FleetOptions {
  socket?: string;
  /** The adminToken given on the command line (`--scope '*' --token T`): every host's, unless its own variable names another. */
  adminToken?: string;
  env: NodeJS.ProcessEnv;
  /** More than one host: each may have its own credentials, `$PROCCTL_ADMIN_TOKEN_<NAME>` and `$PROCCTL_APPROVER_TOKEN_<NAME>`. */
  fleet: boolean;
}

/**
 * How the console reaches one host, the credentials it speaks with there (read again at each
 * connection: rpc/credential.ts, as the CLI's), and what to set when that host refuses them.
 */
export function hostAccess(spec: HostSpec, o: FleetOptions): { dial: () => Promise<Dial>; credentials: () => Operator; fix: string } {
  // One daemon: `--socket` with `--host` names the socket there, as for every command. In a fleet it is the local daemon's.
  const socket = !o.fleet || spec.ssh === undefined ? o.socket : undefined;
  const dial = () => dialFor({ host: spec.ssh, socket, env: spec.ssh === undefined ? withoutHost(o.env) : o.env });
  // A host of a fleet has its own variables first; the file beside the socket is read for the local daemon only.
  const source = { socket: o.socket, remote: spec.ssh !== undefined, env: o.env, ...(o.fleet ? { suffix: envSuffix(spec.name) } : {}) };
  const credentials = (): Operator => operatorCredentials({ ...source, token: o.adminToken });
  return { dial, credentials, fix: operatorFix(source) };
}

/** `local` is this host even where $PROCCTL_HOST names another. */
function withoutHost(env: NodeJS.ProcessEnv): NodeJS.ProcessEnv {
  if (!env.PROCCTL_HOST) return env;
  const { PROCCTL_HOST: _h, ...rest } = env;
  return rest;
}

/**
 * The daemons one console shows (SPEC §17's fleet view): one DaemonLink each (one connection, one
 * subscription while a page is open), so a host that drops is shown disconnected and tried again
 * while the others go on. The page names a host by its name; nothing else of how it is reached.
 */
export class Fleet {
  readonly links: ReadonlyMap<string, DaemonLink>;

  constructor(links: DaemonLink[]) {
    this.links = new Map(links.map((l) => [l.host, l]));
  }

  get names(): string[] {
    return [...this.links.keys()];
  }

  /** The host a request names, or the only one when it names none; a message when it cannot be told. */
  link(host: unknown): DaemonLink | string {
    if (host === undefined || host === null || host === '') {
      if (this.links.size === 1) return [...this.links.values()][0];
      return `name the host: one of ${this.names.join(', ')}`;
    }
    const link = typeof host === 'string' ? this.links.get(host) : undefined;
    return link ?? `no host ${JSON.stringify(host)} in this console: it shows ${this.names.join(', ')}`;
  }

  /** A page's whole-view stream gets every host's pushes; a session's stream its host's only. */
  add(viewer: Viewer, host?: DaemonLink): () => void {
    const leaves = (host ? [host] : [...this.links.values()]).map((l) => l.add(viewer));
    return () => leaves.forEach((leave) => leave());
  }

  close(): void {
    for (const l of this.links.values()) l.close();
  }
}
