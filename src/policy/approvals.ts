import type { RE2JS } from 're2js';
import { compilePattern } from '../config/pattern.js';
import type { ApprovalAction } from '../config/schema.js';
import { remembers, type RememberedRule } from './remembered.js';
import { safeCommand } from './safe.js';

export { compilePattern };

/** The actions are the config schema's (config/schema.ts). */
export type Action = ApprovalAction;

/** An approval rule as the config holds it (SPEC §8): a `match` pattern or a `command` prefix. */
export interface ApprovalRuleConfig {
  match?: string;
  command?: string[];
  action: Action;
  reason?: string;
  scopes?: string[];
}

/** What the rules are asked with: the config's `approvals` section. */
export interface ApprovalPolicy {
  rules: ApprovalRuleConfig[];
  default: Action;
  safe: boolean;
  /** Unset: "ask"; set in the config, the policy judges commands even with no rules. */
  unanalyzable?: Action;
}

/** A rule ready to match: its pattern compiled once, its prefix split, its scopes as a set. */
export interface CompiledRule {
  /** Position in `approvals.rules`, for logs and messages. */
  index: number;
  match: string | undefined;
  command: CompiledPrefix | undefined;
  action: Action;
  reason: string | undefined;
  scopes: ReadonlySet<string> | undefined;
  pattern: RE2JS | undefined;
}

interface CompiledPrefix {
  name: RegExp;
  /** In order: a positional glob, or the spellings of an option that must be present. */
  words: ({ glob: RegExp } | { option: string[] })[];
}

/** What the first matching rule says about a command (the whole line, `match` rules only). */
export interface Decision {
  action: Action;
  rule: CompiledRule;
}

/** One part of a command line, as shell/ found it: a simple command with its words, or something it could not judge. */
export interface Part {
  text: string;
  /** The words (wrappers stripped, the name normalised); a word that is not literal is undefined. */
  argv?: (string | undefined)[];
  /** The words as written (git's global options kept), for the read-only list. */
  raw?: (string | undefined)[];
  /** Why it cannot be judged without running it. */
  unanalyzable?: string;
}

export interface PartDecision {
  text: string;
  decision: Action;
  /** The rule that decided (its position in approvals.rules). */
  rule?: number;
  reason: string;
}

export interface Judgement {
  decision: Action;
  parts: PartDecision[];
  /** The part whose decision is the whole's (the first of the strictest). */
  decided: PartDecision;
  /**
   * The first part that said "review", unless the whole is denied: the command runs in review
   * mode, at once (decision "review") or once a person approved it (decision "ask").
   */
  review?: PartDecision;
}

/** Review is stricter than allow (its changes wait for a person) and laxer than ask (it runs at once). */
const STRICTNESS: Record<Action, number> = { allow: 0, review: 1, ask: 2, deny: 3 };

/** A glob over one word: `*` any run of characters, `?` one; everything else literal, case-sensitive. */
function wordGlob(glob: string): RegExp {
  const body = glob.replace(/[.+^${}()|[\]\\]/g, '\\$&').replace(/\*/g, '.*').replace(/\?/g, '.');
  return new RegExp(`^${body}$`, 's');
}

function compilePrefix(words: string[]): CompiledPrefix {
  return {
    name: wordGlob(words[0]),
    words: words.slice(1).map((w) => (w.startsWith('-') ? { option: w.split('|') } : { glob: wordGlob(w) })),
  };
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
      command: r.command && compilePrefix(r.command),
      action: r.action,
      reason: r.reason,
      scopes: r.scopes && new Set(r.scopes),
      pattern: r.match === undefined ? undefined : compilePattern(r.match),
    }));
    compiled.set(rules, out);
  }
  return out;
}

/**
 * The first `match` rule that applies to the scope and whose pattern matches somewhere in the
 * command line; undefined when none does. Pure.
 */
export function decide(rules: readonly CompiledRule[], command: string, scope: string): Decision | undefined {
  for (const rule of rules) {
    if (rule.scopes !== undefined && !rule.scopes.has(scope)) continue;
    if (rule.pattern?.test(command)) return { action: rule.action, rule };
  }
  return undefined;
}

/** Options present among a command's arguments: `-fr` holds `-f` and `-r` (and itself), `--opt=value` is `--opt`. */
function optionsOf(args: (string | undefined)[]): { options: Set<string>; positional: (string | undefined)[]; unknown: boolean } {
  const options = new Set<string>();
  const positional: (string | undefined)[] = [];
  let unknown = false;
  let ended = false;
  for (const a of args) {
    if (a === undefined) {
      unknown = true;
      positional.push(undefined);
    } else if (!ended && a === '--') ended = true;
    else if (!ended && a.startsWith('--')) options.add(a.split('=')[0]);
    else if (!ended && a.startsWith('-') && a.length > 1) {
      options.add(a);
      for (const ch of a.slice(1)) options.add(`-${ch}`);
    } else positional.push(a);
  }
  return { options, positional, unknown };
}

/**
 * Does a `command` rule match these words? A word that is not literal could be anything: it
 * matches a rule that denies or asks (the strict reading), never one that allows.
 */
function matchesPrefix(rule: CompiledRule, argv: (string | undefined)[]): boolean {
  const prefix = rule.command!;
  const strict = rule.action !== 'allow';
  if (argv[0] === undefined || !prefix.name.test(argv[0])) return false;
  const { options, positional, unknown } = optionsOf(argv.slice(1));
  let at = 0;
  for (const w of prefix.words) {
    if ('option' in w) {
      if (!w.option.some((o) => options.has(o)) && !(strict && unknown)) return false;
    } else {
      const p = positional[at++];
      if (p === undefined) {
        if (!(strict && at <= positional.length)) return false;
      } else if (!w.glob.test(p)) return false;
    }
  }
  return true;
}

const applies = (rule: CompiledRule, scope: string) => rule.scopes === undefined || rule.scopes.has(scope);
const why = (rule: CompiledRule) => rule.reason ?? `approval rule ${rule.index}`;

/**
 * One part's decision: the first rule that matches it, else the read-only list, else
 * approvals.default. A remembered answer allows it over a configured ask and the default, never
 * over a configured deny.
 */
function judgePart(policy: ApprovalPolicy, rules: readonly CompiledRule[], part: Part, scope: string, remembered: readonly RememberedRule[]): PartDecision {
  if (part.unanalyzable !== undefined) {
    const byText = rules.find((r) => applies(r, scope) && r.pattern?.test(part.text));
    const own: PartDecision = { text: part.text, decision: policy.unanalyzable ?? 'ask', reason: `cannot be judged without running it: ${part.unanalyzable} (approvals.unanalyzable)` };
    if (byText && STRICTNESS[byText.action] > STRICTNESS[own.decision]) return { text: part.text, decision: byText.action, rule: byText.index, reason: why(byText) };
    return own;
  }
  const hit = (rule: CompiledRule) => applies(rule, scope) && (rule.command ? part.argv !== undefined && matchesPrefix(rule, part.argv) : rule.pattern!.test(part.text));
  const first = rules.find(hit);
  if (first?.action !== 'deny' && part.argv && !rules.some((r) => r.action === 'deny' && hit(r))) {
    const kept = remembered.findIndex((r) => r.scope === scope && remembers(r, part.argv!));
    if (kept !== -1) return { text: part.text, decision: 'allow', reason: `remembered answer ${kept + 1} (${remembered[kept].kind}: ${remembered[kept].words.join(' ')})` };
  }
  if (first) return { text: part.text, decision: first.action, rule: first.index, reason: why(first) };
  if (policy.safe && part.argv && safeCommand(part.argv, part.raw ?? part.argv)) return { text: part.text, decision: 'allow', reason: 'a read-only command (approvals.safe)' };
  return { text: part.text, decision: policy.default, reason: `no rule matches it (approvals.default is "${policy.default}")` };
}

/**
 * The whole line's `match` decision among the parts', said once. A rule that already decided a
 * part says nothing new about the line (`rm -rf build` under a `match: "rm -rf"` rule is that
 * rule's part, not that part twice); a line that is one part (its text the part's) stands in that
 * part's place when it is stricter; otherwise it is one more entry, the line's own.
 */
function byWholeLine(decisions: PartDecision[], whole: PartDecision): void {
  if (decisions.some((d) => d.rule === whole.rule)) return;
  const same = decisions.findIndex((d) => d.text === whole.text.trim());
  if (same === -1) decisions.push(whole);
  else if (STRICTNESS[whole.decision] > STRICTNESS[decisions[same].decision]) decisions[same] = { ...whole, text: decisions[same].text };
}

/**
 * How a command line is judged (SPEC §8): each part on its own, `match` rules also against the
 * whole line, and the whole gets the strictest (deny > ask > review > allow); a part that said
 * review makes an asked command run in review mode once approved. Pure.
 */
export function judge(policy: ApprovalPolicy, line: string, parts: readonly Part[], scope: string, remembered: readonly RememberedRule[] = []): Judgement {
  const rules = compileRules(policy.rules);
  const decisions = parts.map((p) => judgePart(policy, rules, p, scope, remembered));
  const whole = decide(rules, line, scope);
  // A whole-line match that a remembered answer already settled for every part does not ask again.
  const settled = whole && whole.action !== 'deny' && decisions.length > 0 && decisions.every((d) => d.reason.startsWith('remembered answer'));
  if (whole && !settled) byWholeLine(decisions, { text: line, decision: whole.action, rule: whole.rule.index, reason: why(whole.rule) });
  if (decisions.length === 0) decisions.push({ text: line, decision: policy.default, reason: `nothing to run (approvals.default is "${policy.default}")` });
  let decided = decisions[0];
  for (const d of decisions) if (STRICTNESS[d.decision] > STRICTNESS[decided.decision]) decided = d;
  const review = decided.decision === 'deny' ? undefined : decisions.find((d) => d.decision === 'review');
  return { decision: decided.decision, parts: decisions, decided, ...(review ? { review } : {}) };
}

/**
 * Does a policy need the command parsed at all (SPEC §8)? When rules exist, the default is not
 * "allow", or the operator wrote approvals.unanalyzable. A fresh install (none of these) parses
 * nothing: the exec stays as fast as before.
 */
export function judges(policy: ApprovalPolicy): boolean {
  return policy.rules.length > 0 || policy.default !== 'allow' || policy.unanalyzable !== undefined;
}
