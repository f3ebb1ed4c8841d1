import type { RE2JS } from 're2js';
import { compilePattern } from '../config/pattern.js';

export { compilePattern };

/** An approval rule as the config holds it (SPEC §8). */
export interface ApprovalRuleConfig {
  match: string;
  action: 'allow' | 'deny' | 'ask';
  reason?: string;
  scopes?: string[];
}

/** A rule ready to match: its pattern compiled once, its scopes as a set. */
export interface CompiledRule {
  /** Position in `approvals.rules`, for logs and messages. */
  index: number;
  match: string;
  action: ApprovalRuleConfig['action'];
  reason: string | undefined;
  scopes: ReadonlySet<string> | undefined;
  pattern: RE2JS;
}

/** What the first matching rule says about a command. */
export interface Decision {
  action: CompiledRule['action'];
  rule: CompiledRule;
}

const compiled = new WeakMap<readonly ApprovalRuleConfig[], CompiledRule[]>();

/**
 * The rules of one loaded config, compiled once: each config object is compiled the first time
 * it is asked for (the daemon asks when it loads or reloads the config) and kept with it.
 */
export function compileRules(rules: readonly ApprovalRuleConfig[]): CompiledRule[] {
  let out = compiled.get(rules);
  if (out === undefined) {
    out = rules.map((r, index) => ({
      index,
      match: r.match,
      action: r.action,
      reason: r.reason,
      scopes: r.scopes && new Set(r.scopes),
      pattern: compilePattern(r.match),
    }));
    compiled.set(rules, out);
  }
  return out;
}

/**
 * The first rule that applies to the scope and whose pattern matches somewhere in the command;
 * undefined when none does (the command is allowed). Pure: the same rules, command and scope
 * always give the same answer.
 */
export function decide(rules: readonly CompiledRule[], command: string, scope: string): Decision | undefined {
  for (const rule of rules) {
    if (rule.scopes !== undefined && !rule.scopes.has(scope)) continue;
    if (rule.pattern.test(command)) return { action: rule.action, rule };
  }
  return undefined;
}
