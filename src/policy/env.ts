import { CORE_ENV, DEFAULT_EXCLUDE } from '../config/schema.js';

export { DEFAULT_EXCLUDE };
/** What a session inherits of the daemon's environment (SPEC §8): secrets stay with the daemon. */
export interface EnvPolicy {
  /** Glob patterns (`*`, `?`), case-insensitive: variables withheld from sessions. */
  exclude: string[];
  /** Glob patterns kept even when excluded (or outside the core set). */
  include: string[];
  /** "core": only the core set and `include` are passed. */
  inherit?: 'all' | 'core';
}

/**
 * Values that are credentials whatever their variable is called: a URL with `user:password@`
 * (a `DATABASE_URL`, an `HTTPS_PROXY` with credentials), an HTTP `Bearer`/`Basic` authorization,
 * a PEM private key.
 */
const CREDENTIAL_VALUES = [/^[a-z][a-z0-9+.-]*:\/\/[^/@\s:]*:[^/@\s]+@/i, /^(bearer|basic)\s+\S{8,}/i, /-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----/];

/** Does this value carry a credential (CREDENTIAL_VALUES)? */
export function credentialValue(value: string): boolean {
  return CREDENTIAL_VALUES.some((re) => re.test(value));
}


/** A glob over a whole name: `*` any run of characters, `?` one, everything else literal. */
export function globToRegExp(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`, 'i');
}

export interface Inherited {
  env: NodeJS.ProcessEnv;
  /** How many of the daemon's variables were withheld (never which, or their values). */
  withheld: number;
}

/** The daemon's environment less what the policy withholds; computed once per config (the daemon's own environment does not change). */
export function inheritedEnv(base: NodeJS.ProcessEnv, policy: EnvPolicy): Inherited {
  const exclude = policy.exclude.map(globToRegExp);
  const include = policy.include.map(globToRegExp);
  const core = policy.inherit === 'core' ? CORE_ENV.map(globToRegExp) : undefined;
  const env: NodeJS.ProcessEnv = {};
  let withheld = 0;
  for (const [name, value] of Object.entries(base)) {
    const kept = include.some((re) => re.test(name));
    const secret = exclude.some((re) => re.test(name)) || (value !== undefined && credentialValue(value));
    const outsideCore = core !== undefined && !core.some((re) => re.test(name));
    if (!kept && (secret || outsideCore)) withheld++;
    else env[name] = value;
  }
  return { env, withheld };
}

const cache = new WeakMap<EnvPolicy, Inherited>();

/** inheritedEnv of the daemon's own environment, once per policy object (a reload makes a new one). */
export function daemonInheritance(policy: EnvPolicy): Inherited {
  let found = cache.get(policy);
  if (!found) {
    found = inheritedEnv(process.env, policy);
    cache.set(policy, found);
  }
  return found;
}
