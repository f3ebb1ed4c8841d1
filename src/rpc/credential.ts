import { readFileSync } from 'node:fs';
import { resolveSocketPath } from '../config/paths.js';

const set = (env: NodeJS.ProcessEnv, name: string) => env[name] || undefined;

/**
 * The approver credential a person's client sends when it answers an approval (SPEC §8):
 * `$PROCCTL_APPROVER_TOKEN` (the configured approvals.approverToken, or for a daemon on another
 * host), else the one the local daemon made beside its socket. Undefined when neither is there.
 * `remote`: the daemon is on another host, whose file is not this one: only the variable counts
 * (this host's credential is never sent to another daemon).
 */
export function approverCredential(socket: string | undefined, env: NodeJS.ProcessEnv = process.env, remote = false): string | undefined {
  const given = set(env, 'PROCCTL_APPROVER_TOKEN');
  if (given || remote) return given;
  try {
    return readFileSync(`${resolveSocketPath(socket, env)}.approver`, 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** What makes a request the operator's (scope "*", SPEC §8): the adminToken, or where none is configured the approver credential. */
export interface OperatorCredentials {
  adminToken?: string;
  approverToken?: string;
}

/** Where a client finds the operator's credentials for one daemon. */
export interface OperatorSource {
  /** The socket `--socket` names (or the default): the approver credential file is beside it. */
  socket?: string;
  /** The daemon is on another host (`--host`): its credential file is not readable here. */
  remote: boolean;
  /** `--scope '*' --token T`: the adminToken given on the command line. */
  token?: string;
  /** One host of the console's fleet: its own `$PROCCTL_ADMIN_TOKEN_<SUFFIX>` and `$PROCCTL_APPROVER_TOKEN_<SUFFIX>` come first. */
  suffix?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * The operator's credentials, the same for the CLI and the console (SPEC §8, §17): the adminToken
 * is a fleet host's own variable, else `--token`, else `$PROCCTL_ADMIN_TOKEN`; the approver
 * credential is a fleet host's own variable, else `$PROCCTL_APPROVER_TOKEN`, else (a local daemon)
 * the file beside its socket.
 */
export function operatorCredentials(o: OperatorSource): OperatorCredentials {
  const env = o.env ?? process.env;
  const own = (name: string) => (o.suffix !== undefined ? set(env, `${name}_${o.suffix}`) : undefined);
  const adminToken = own('PROCCTL_ADMIN_TOKEN') ?? (o.token || undefined) ?? set(env, 'PROCCTL_ADMIN_TOKEN');
  const approverToken = own('PROCCTL_APPROVER_TOKEN') ?? approverCredential(o.socket, env, o.remote);
  return { ...(adminToken ? { adminToken } : {}), ...(approverToken ? { approverToken } : {}) };
}

/**
 * The params that make a request the operator's: scope "*", the adminToken as its token when
 * there is one, and the approver credential where there is no adminToken (the daemon then takes
 * it for the operator) or when the request answers for the person (`answer`; the adminToken
 * answers too, for a daemon whose credential file is not here).
 */
export function operatorParams(c: OperatorCredentials, answer = false): Record<string, unknown> {
  const approver = c.approverToken ?? c.adminToken;
  return {
    scope: '*',
    ...(c.adminToken ? { token: c.adminToken } : {}),
    ...(approver && (answer || !c.adminToken) ? { approverToken: approver } : {}),
  };
}

/**
 * What to set so that a client is taken as the operator of this daemon, for a refusal: the
 * variables (a fleet host's own names), and for a local daemon the file the daemon makes when its
 * config names no approvals.approverToken.
 */
export function operatorFix(o: Omit<OperatorSource, 'token'>): string {
  const env = o.env ?? process.env;
  const name = (v: string) => `$${v}${o.suffix !== undefined ? `_${o.suffix}` : ''}`;
  const admin = `set ${name('PROCCTL_ADMIN_TOKEN')} to the daemon's adminToken${o.suffix === undefined ? " (or pass --scope '*' --token ADMIN)" : ''}`;
  const approver = `or, where it has no adminToken, ${name('PROCCTL_APPROVER_TOKEN')} to its approver credential (its approvals.approverToken, or the one it made in <socket>.approver on its host)`;
  const file = o.remote ? '' : `, or run as the user who can read ${resolveSocketPath(o.socket, env)}.approver (made there when the config names no approvals.approverToken)`;
  return `${admin}, ${approver}${file}`;
}
