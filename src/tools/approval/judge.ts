import { judge, judges, type ApprovalPolicy, type Judgement, type Part, type PartDecision } from '../../policy/approvals.js';
import type { RememberedRule } from '../../policy/remembered.js';
import { analyze, bashLoading } from '../../shell/bash.js';
import type { SessionDecision } from '../../session/session.js';

/**
 * Judge a command line against the approval policy (SPEC §8): parsed once (shell/bash.ts), each
 * simple command and each part that cannot be judged decided by policy/approvals.ts. Undefined
 * when the policy judges nothing (no rules, everything allowed): then nothing is parsed.
 */
export function judgeCommand(policy: ApprovalPolicy, command: string, scope: string, remembered: readonly RememberedRule[] = []): Judgement | undefined {
  if (!judges(policy)) return undefined;
  return judge(policy, command, partsOf(command), scope, remembered);
}

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
