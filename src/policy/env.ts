import { DEFAULT_EXCLUDE } from '../config/schema.js';

export { DEFAULT_EXCLUDE };
/** What a session inherits of the daemon's environment (SPEC §8): secrets stay with the daemon. */
export interface EnvPolicy {
  /** Glob patterns (`*`, `?`), case-insensitive: variables withheld from sessions. */
  exclude: string[];
  /** Glob patterns kept even when excluded. */
  include: string[];
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
  const env: NodeJS.ProcessEnv = {};
  let withheld = 0;
  for (const [name, value] of Object.entries(base)) {
    if (exclude.some((re) => re.test(name)) && !include.some((re) => re.test(name))) withheld++;
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
