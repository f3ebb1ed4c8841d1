import { createHash, timingSafeEqual } from 'node:crypto';

import { ALL_SCOPES } from '../config/schema.js';

export { ALL_SCOPES };

export type ElevatedPolicy = 'deny' | 'ask' | 'allow';

/** A scope's policy as the config writes it (`scopes.NAME`). */
export interface ScopeConfig {
  token?: string;
  background: boolean;
  elevated: ElevatedPolicy;
  selfApprove?: boolean;
}

export interface PolicyConfig {
  scopes: Record<string, ScopeConfig>;
  adminToken?: string;
  strictScopes?: boolean;
  approvals?: { approverToken?: string };
}

/** What a scope may do; a scope the config does not list isolates by name only. */
export interface ScopePolicy {
  background: boolean;
  elevated: ElevatedPolicy;
  /** Its own clients may answer its approvals without the approver credential. */
  selfApprove?: boolean;
}

const OPEN: ScopePolicy = { background: true, elevated: 'deny', selfApprove: false };

/** A stored token: the sha256 of the token, from `sha256:<hex>` or, for a plain value, computed here. */
interface Secret {
  digest: Buffer;
  plain: boolean;
}

const SHA256 = /^sha256:([0-9a-f]{64})$/i;
const sha256 = (text: string) => createHash('sha256').update(text, 'utf8').digest();

function secretOf(stored: string): Secret {
  const hex = SHA256.exec(stored)?.[1];
  return hex ? { digest: Buffer.from(hex, 'hex'), plain: false } : { digest: sha256(stored), plain: true };
}

/** Does `presented` hash to the stored digest? Compared in constant time, whatever its length. */
function matches(secret: Secret, presented: unknown): boolean {
  return typeof presented === 'string' && timingSafeEqual(sha256(presented), secret.digest);
}

export type Authorization =
  | { ok: true; scope: string; admin: boolean; policy: ScopePolicy }
  | { ok: false; why: string };

/** The config's scopes, compiled once per config (a reload compiles anew). */
export class ScopeRules {
  private readonly secrets = new Map<string, Secret>();
  private readonly admin: Secret | undefined;
  private readonly approver: Secret | undefined;

  constructor(private readonly config: PolicyConfig) {
    for (const [name, scope] of Object.entries(config.scopes)) if (scope.token !== undefined) this.secrets.set(name, secretOf(scope.token));
    this.admin = config.adminToken === undefined ? undefined : secretOf(config.adminToken);
    const approver = config.approvals?.approverToken;
    this.approver = approver === undefined ? undefined : secretOf(approver);
  }

  /** The config names its own approver credential; else the daemon makes one at each start (SPEC §8). */
  get hasApproverToken(): boolean {
    return this.approver !== undefined;
  }

  /**
   * Does `presented` carry the approver credential: `approvals.approverToken`, the `adminToken`,
   * or (when the config names none) `made`, the one the daemon wrote beside its socket?
   */
  isApprover(presented: unknown, made: string | undefined): boolean {
    if (typeof presented !== 'string' || presented.length === 0) return false;
    if (this.approver) return matches(this.approver, presented) || (this.admin !== undefined && matches(this.admin, presented));
    if (this.admin && matches(this.admin, presented)) return true;
    return made !== undefined && matches({ digest: sha256(made), plain: false }, presented);
  }

  /** Is `presented` the adminToken (an answer given by the operator's credential, for the audit trail)? */
  isAdmin(presented: unknown): boolean {
    return typeof presented === 'string' && presented.length > 0 && this.admin !== undefined && matches(this.admin, presented);
  }

  /** Config keys holding a plain token instead of its `sha256:<hex>`: the daemon warns about them. */
  plainTokens(): string[] {
    const out = [...this.secrets].filter(([, s]) => s.plain).map(([name]) => `scopes.${name}.token`);
    if (this.admin?.plain) out.push('adminToken');
    if (this.approver?.plain) out.push('approvals.approverToken');
    return out;
  }

  policy(scope: string): ScopePolicy {
    return Object.hasOwn(this.config.scopes, scope) ? this.config.scopes[scope] : OPEN;
  }

  /**
   * May a request with this token act in this scope? Scope "*" is the operator's: the adminToken,
   * or where none is configured the approver credential (`approver()`, asked only then), so the
   * person's console works on a fresh install (SPEC §17).
   */
  authorize(scope: string, token: unknown, approver?: () => boolean): Authorization {
    if (scope === ALL_SCOPES) {
      if (!this.admin && approver?.() === true) return { ok: true, scope, admin: true, policy: OPEN };
      if (!this.admin) return { ok: false, why: 'scope "*" (every scope) needs the daemon\'s adminToken, or where none is configured the approver credential ("approverToken": approvals.approverToken, or the one the daemon made beside its socket), and this request carries neither that this daemon knows' };
      if (!matches(this.admin, token)) return { ok: false, why: 'scope "*" (every scope) needs the adminToken: pass it as "token" (procctl --scope \'*\' --token ...)' };
      return { ok: true, scope, admin: true, policy: OPEN };
    }
    if (this.config.strictScopes && !Object.hasOwn(this.config.scopes, scope)) {
      const listed = Object.keys(this.config.scopes);
      return {
        ok: false,
        why: `scope "${scope}" is not in the config, and strictScopes refuses unlisted scopes; use one of ${listed.length ? listed.map((n) => `"${n}"`).join(', ') : '(none are listed)'}, or an operator can add scopes.${scope} to the config`,
      };
    }
    const secret = this.secrets.get(scope);
    if (secret && !matches(secret, token)) {
      return { ok: false, why: `scope "${scope}" needs its token: pass "token" with the request (procctl --scope ${scope} --token ...)` };
    }
    return { ok: true, scope, admin: false, policy: this.policy(scope) };
  }
}

const compiled = new WeakMap<PolicyConfig, ScopeRules>();

/** The compiled rules of a config object, made on first use. */
export function scopeRules(config: PolicyConfig): ScopeRules {
  let rules = compiled.get(config);
  if (!rules) {
    rules = new ScopeRules(config);
    compiled.set(config, rules);
  }
  return rules;
}
