import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { Config, Credential, NetworkPolicy } from '../config/schema.js';
import { byName, networkOf } from './network.js';

/** A credential as one session holds it (SPEC §21): the value stays in the daemon, the job gets the placeholder. */
export interface SessionCredential {
  name: string;
  hosts: readonly string[];
  /** The header the proxy writes the value into, lower case. */
  header: string;
  value: string;
  /** What `$PROCCTL_CRED_<name>` holds in this session: worthless anywhere but through its proxy, to `hosts`. */
  placeholder: string;
  /** The file the value is read from, hidden inside the sandbox. */
  file?: string;
  /**
   * Carried by a restart or a crash and no longer given by the config (removed, its hosts changed,
   * its value unreadable): why. Its value is empty and never written in; a request to its hosts is
   * refused saying this, and its placeholder sent elsewhere is refused as before.
   */
  withdrawn?: string;
}

/** The variable a session's placeholder for `name` is in. */
export const credentialVariable = (name: string) => `PROCCTL_CRED_${name}`;

/** The credentials a scope's sandboxed sessions get: its network's, less those whose `scopes` leave it out. */
export function credentialsOf(config: Pick<Config, 'sandbox' | 'scopes'>, scope: string): Credential[] {
  const policy = byName(networkOf(config, scope));
  if (!policy) return [];
  return policy.credentials.filter((c) => c.scopes === undefined || c.scopes.includes(scope));
}

/** A credential's value, from where the config says it is; throws with what is wrong and the fix. */
export function credentialValue(c: Credential, env: NodeJS.ProcessEnv = process.env): string {
  let value: string | undefined;
  if (c.value !== undefined) value = c.value;
  else if (c.valueEnv !== undefined) {
    value = env[c.valueEnv];
    if (value === undefined || value === '') throw new Error(`credential "${c.name}": the daemon's environment has no ${c.valueEnv} (valueEnv); set it where the daemon starts (the unit's Environment= or EnvironmentFile=) or name another source`);
  } else {
    try {
      value = readFileSync(c.valueFile!, 'utf8').replace(/\r?\n$/, '');
    } catch (err) {
      throw new Error(`credential "${c.name}": cannot read valueFile ${c.valueFile} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); make it readable by the daemon's user`);
    }
  }
  if (value.length < 4) throw new Error(`credential "${c.name}": its value is shorter than 4 characters; give the whole value (such as "Bearer ..." or "Basic ...")`);
  if (/[\r\n\0]/.test(value)) throw new Error(`credential "${c.name}": its value has a line break or NUL, which no header can carry; keep it on one line`);
  return value;
}

/** Every credential of the config that cannot be read now, said as its problem; undefined when all can. */
export function credentialProblem(config: Pick<Config, 'sandbox' | 'scopes'>, env: NodeJS.ProcessEnv = process.env): string | undefined {
  const lists = [config.sandbox.network, ...Object.values(config.scopes).map((s) => s.network)];
  for (const network of lists) {
    const policy = network === undefined ? undefined : byName(network);
    for (const c of policy?.credentials ?? []) {
      try {
        credentialValue(c, env);
      } catch (err) {
        return (err as Error).message;
      }
    }
  }
  return undefined;
}

/** A session's credentials, each with a placeholder of its own, fresh for this session. */
export function sessionCredentials(list: readonly Credential[], env: NodeJS.ProcessEnv = process.env): SessionCredential[] {
  return list.map((c) => ({
    name: c.name,
    hosts: c.hosts,
    header: c.header.toLowerCase(),
    value: credentialValue(c, env),
    placeholder: `procctl-placeholder-${c.name}-${randomBytes(18).toString('base64url')}`,
    ...(c.valueFile === undefined ? {} : { file: c.valueFile }),
  }));
}

/** The start of the reason a request to a withdrawn credential's host is refused with (docs/credentials.md). */
export const CREDENTIAL_WITHDRAWN = 'credential_withdrawn';

/**
 * A running session's credentials after a restart or a crash (SPEC §19, §21): the placeholders it
 * was given at its start, each with the value the config gives now, read as a start reads it (a
 * rotated value is used from now on; a changed header too). A credential the config no longer
 * gives the session's scope, or gives for other hosts, is withdrawn: the job keeps its placeholder
 * but nothing is written in for it, and a request to its hosts is refused saying why. Never throws.
 */
export function carriedCredentials(now: readonly Credential[], carried: readonly { name: string; hosts: readonly string[]; placeholder: string }[], caProblem?: string, env: NodeJS.ProcessEnv = process.env): SessionCredential[] {
  const same = (a: readonly string[], b: readonly string[]) => a.length === b.length && [...a].sort().join('\n') === [...b].sort().join('\n');
  return carried.map((c) => {
    const gone = (why: string): SessionCredential => ({
      name: c.name,
      hosts: [...c.hosts],
      header: '',
      value: '',
      placeholder: c.placeholder,
      withdrawn: `${CREDENTIAL_WITHDRAWN}: credential ${c.name} ${why}, so the proxy no longer writes it in and nothing was sent; start a new session for the credentials the config gives now`,
    });
    const found = now.find((x) => x.name.toLowerCase() === c.name.toLowerCase());
    if (!found) return gone("is no longer in the daemon's config for this session's scope (it changed since the session started)");
    if (!same(found.hosts, c.hosts)) return gone(`was given for ${c.hosts.join(', ')} and the config now gives it for ${found.hosts.join(', ')}`);
    if (caProblem !== undefined) return gone(`cannot be sent: ${caProblem}`);
    let value: string;
    try {
      value = credentialValue(found, env);
    } catch (err) {
      return gone(`cannot be read now (${(err as Error).message})`);
    }
    return { name: c.name, hosts: [...c.hosts], header: found.header.toLowerCase(), value, placeholder: c.placeholder, ...(found.valueFile === undefined ? {} : { file: found.valueFile }) };
  });
}

/** What `daemon.status` and `policy check` say a scope gets: names and hosts, never values. */
export function credentialSummary(config: Pick<Config, 'sandbox' | 'scopes'>, scope: string): { name: string; hosts: string[]; header: string; variable: string }[] {
  return credentialsOf(config, scope).map((c) => ({ name: c.name, hosts: [...c.hosts], header: c.header, variable: credentialVariable(c.name) }));
}

/** A network policy as the trail and the console show it: credentials by name, hosts and header, never their values or files. */
export function networkShown(policy: NetworkPolicy): NetworkPolicy | Record<string, unknown> {
  if (typeof policy !== 'object' || policy.credentials.length === 0) return policy;
  return { ...policy, credentials: policy.credentials.map((c) => ({ name: c.name, hosts: c.hosts, header: c.header, ...(c.scopes ? { scopes: c.scopes } : {}) })) };
}
