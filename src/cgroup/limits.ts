import { forbidden, unavailable } from '../base/errors.js';
import { CgroupsUnavailable, type CgroupLayout, type Controller } from './host.js';
import type { SessionLimits } from './session.js';

/** Each per-session limit and the controller it needs. */
const NEEDS: Record<keyof SessionLimits, Controller> = { memoryBytes: 'memory', processes: 'pids', cpuPercent: 'cpu' };
const KEYS = Object.keys(NEEDS) as (keyof SessionLimits)[];

/** Where the per-session limits are set: the config's `limits.session`, and each scope's `limits`. */
export interface LimitsConfig {
  limits: { session: SessionLimits };
  scopes: Record<string, { limits?: SessionLimits }>;
}

/**
 * A session's limits (SPEC §15): what the exec asks for, within its scope's (`scopes.NAME.limits`,
 * else `limits.session`); an elevated session has no configured bound, only what it asks for.
 * Asking for more than the bound is `forbidden`, naming both.
 */
export function sessionLimits(config: LimitsConfig, scope: string, asked: SessionLimits | undefined, elevated: boolean): SessionLimits {
  const scoped = config.scopes[scope]?.limits;
  const out: SessionLimits = {};
  for (const k of KEYS) {
    const bound = elevated ? undefined : (scoped?.[k] ?? config.limits.session[k]);
    const want = asked?.[k];
    if (want !== undefined && bound !== undefined && want > bound) {
      const where = scoped?.[k] !== undefined ? `scopes.${scope}.limits.${k}` : `limits.session.${k}`;
      throw forbidden(`limits.${k} ${want} is more than this scope allows (${where} = ${bound}); ask for ${bound} or less`, { path: ['limits', k], bound });
    }
    const value = want ?? bound;
    if (value !== undefined) out[k] = value;
  }
  return out;
}

/** The first limit this host cannot enforce, as words, or undefined. */
function missing(layout: CgroupLayout, limits: SessionLimits | undefined, where: string): string | undefined {
  for (const k of KEYS) {
    if (limits?.[k] === undefined || layout.controllers[NEEDS[k]] !== null) continue;
    return `${where}.${k} needs the ${NEEDS[k]} controller, and this host gives the daemon none (cgroups: ${layout.mode}; ${layout.reason})`;
  }
  return undefined;
}

/**
 * Refuse a config whose per-session limits this host cannot enforce: the daemon does not start
 * (a reload is rejected) rather than run sessions without a limit the operator set.
 */
export function requireLimits(layout: CgroupLayout, config: LimitsConfig): void {
  const problem =
    missing(layout, config.limits.session, 'limits.session') ??
    Object.entries(config.scopes)
      .map(([name, s]) => missing(layout, s.limits, `scopes.${name}.limits`))
      .find((p) => p !== undefined);
  if (problem) throw new CgroupsUnavailable(problem);
}

/** An exec asking for a limit the host cannot enforce is refused (`unavailable`), never run without it. */
export function checkAsked(layout: CgroupLayout, asked: SessionLimits | undefined): void {
  const problem = missing(layout, asked, 'limits');
  if (problem) throw unavailable(problem);
}

/** True when there is anything to set. */
export function hasLimits(l: SessionLimits): boolean {
  return KEYS.some((k) => l[k] !== undefined);
}
