import { invalid, unavailable } from '../base/errors.js';
import type { ExecParams } from '../schema/exec.js';
import type { Daemon } from './context.js';

/**
 * Whether an exec holds its changes for review (SPEC §16): the approval rules' "review" (`byRule`,
 * the part that said it: the agent cannot opt out), else its `changes`, else the scope's, else
 * `sandbox.changes`. Review needs a sandbox with workspaces and a host that can mount an overlay;
 * where either is missing the request is refused, never run with direct writes.
 */
export function reviewed(d: Daemon, scope: string, p: ExecParams, byRule?: string): boolean | Promise<boolean> {
  const config = d.config();
  const own = Object.hasOwn(config.scopes, scope) ? config.scopes[scope].changes : undefined;
  const mode = byRule ? 'review' : (p.changes ?? own ?? config.sandbox.changes);
  if (mode !== 'review') return false;
  const from = byRule
    ? `the approval rules hold this command's changes for a person (review: ${byRule})`
    : p.changes
      ? 'changes: "review"'
      : own
        ? `scopes.${scope}.changes is "review"`
        : 'sandbox.changes is "review"';
  // With a rule, "direct" is no way out: only the operator's config can change what it says.
  const instead = byRule ? 'an operator changes the rule' : 'pass changes: "direct"';
  if (p.elevated) throw invalid(`${from}, but an elevated exec runs outside the sandbox, where its writes cannot be held: run it without elevated${byRule ? '' : ', or with changes: "direct"'}`, { path: [byRule ? 'command' : 'changes'] });
  if (config.sandbox.mode !== 'workspace-write') {
    throw invalid(`${from}, but review holds a sandboxed job's writes to its workspaces and sandbox.mode is "${config.sandbox.mode}": an operator sets sandbox.mode to "workspace-write" with sandbox.workspaces, or ${instead}; nothing ran`, { path: [byRule ? 'command' : 'changes'] });
  }
  // Answered at once where nothing asks for review (an exec's usual case): no promise on its way.
  const supported = (support: Awaited<ReturnType<Daemon['reviewSupport']>>) => {
    if (!support.review) throw unavailable(`${from}, but this host cannot hold changes for review: ${support.reason}; nothing ran`);
    return true;
  };
  const support = d.reviewSupport();
  return support instanceof Promise ? support.then(supported) : supported(support);
}
