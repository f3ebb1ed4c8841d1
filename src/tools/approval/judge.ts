import { judge, judges, type ApprovalPolicy, type Judgement, type Part, type PartDecision } from '../../policy/approvals.js';
import type { RememberedRule } from '../../policy/remembered.js';
import { analyze, bashLoading } from '../../shell/bash.js';
import type { SessionDecision } from '../../session/session.js';

/**
 * Judge a command line against the approval policy (SPEC §8): parsed once (shell/bash.ts), each
 * simple command and each part that cannot be judged decided by policy/approvals.ts. Undefined
 * when the policy judges nothing (no rules, everything allowed): then nothing is parsed.
 */
export function judgeCommand(policy: ApprovalPolicy, command: string, scope: string, remembered: readonly RememberedRule[] = NONE): Judgement | undefined {
  if (!judges(policy)) return undefined;
  if (command.length > MAX_KEPT_LINE) return judge(policy, command, partsOf(command), scope, remembered);
  let kept = recent.get(policy);
  if (kept === undefined || kept.remembered !== remembered) recent.set(policy, (kept = { remembered, lines: new Map() }));
  const key = `${scope}\0${command}`;
  const known = kept.lines.get(key);
  if (known !== undefined) return known;
  const judged = judge(policy, command, partsOf(command), scope, remembered);
  if (kept.lines.size >= MAX_KEPT_LINES) kept.lines.clear();
  kept.lines.set(key, judged);
  return judged;
}

/** No remembered answers: one list, so calls that pass none share what is kept for it. */
const NONE: readonly RememberedRule[] = [];
/**
 * The judgements of lines judged lately, by policy (a reload makes a new one) and for one list
 * of remembered answers (a person's "remember" or "rules rm" makes a new one): a judgement depends
 * on nothing else, and an agent runs the same lines again and again (a parse and twenty rules cost
 * ~125 µs of an exec's round trip, a lookup well under one). Judgements are read, never changed,
 * by their users.
 */
const recent = new WeakMap<ApprovalPolicy, { remembered: readonly RememberedRule[]; lines: Map<string, Judgement> }>();
const MAX_KEPT_LINES = 1000;
/** Longer lines are judged each time: kept lines hold at most ~4 MB. */
const MAX_KEPT_LINE = 4096;

/**
 * What judging under this policy waits for first: the bash parser's load (the daemon starts it
 * once it serves), when the policy judges commands and the parser is not loaded yet; else
 * undefined, and the command is judged in the same turn.
 */
export function judgeReady(policy: ApprovalPolicy): Promise<void> | undefined {
  return judges(policy) ? bashLoading() : undefined;
}

/** The parts of a command line, as the policy judges them (the parser loaded: judgeReady). */
export function partsOf(command: string): Part[] {
  const a = analyze(command);
  return [...a.commands.map((c) => ({ text: c.text, argv: c.argv, raw: c.raw })), ...a.unanalyzable.map((u) => ({ text: u.text, unanalyzable: u.why }))];
}

/** What a session keeps of its judgement: the deciding part (review's, when that is the decision) and its rule. */
export function decisionOf(j: Judgement): SessionDecision {
  const part = j.decision === 'review' && j.review ? j.review : j.decided;
  return { action: j.decision, part: part.text.length > 200 ? `${part.text.slice(0, 200)}…` : part.text, ...(part.rule !== undefined ? { rule: part.rule } : {}), reason: part.reason };
}

/** The words that say which part decided and why: `rm -rf build (rule 2: recursive delete)`. */
export function decidedBy(d: PartDecision): string {
  const text = d.text.length > 200 ? `${d.text.slice(0, 200)}…` : d.text;
  if (d.rule === undefined) return `${text}: ${d.reason}`;
  return d.reason === `approval rule ${d.rule}` ? `${text} (rule ${d.rule})` : `${text} (rule ${d.rule}: ${d.reason})`;
}
