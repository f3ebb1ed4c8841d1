import { forbidden, invalid, notFound } from '../../base/errors.js';
import type { CallContext, Daemon } from '../context.js';

/**
 * `rules.list` (`procctl rules`, SPEC §8): the remembered answers, numbered, then the configured
 * rules. With the approver credential every scope's remembered answers are listed; else the
 * caller's scope's.
 */
export function listRules(d: Daemon, ctx: CallContext) {
  const all = ctx.caller?.approver === true;
  const remembered = d.remembered
    .list()
    .map((r, i) => ({ n: i + 1, ...r, at: new Date(r.at).toISOString() }))
    .filter((r) => all || r.scope === ctx.scope);
  const configured = d.config().approvals.rules.map((r, index) => ({ index, ...r }));
  const lines = [
    remembered.length ? 'Remembered answers (procctl rules rm N forgets one):' : 'No remembered answers.',
    ...remembered.map((r) => `  ${r.n}. allow ${r.kind} "${r.words.join(' ')}" in scope ${r.scope} (from "${r.from}", ${r.at})`),
    configured.length ? 'Rules from the config (a remembered answer never overrides a deny):' : 'No rules in the config.',
    ...configured.map((r) => `  rule ${r.index}: ${r.action} ${r.command ? `command ${JSON.stringify(r.command)}` : `match ${JSON.stringify(r.match)}`}${r.scopes ? ` in ${r.scopes.join(', ')}` : ''}${r.reason ? ` (${r.reason})` : ''}`),
    `approvals.default is "${d.config().approvals.default}"${d.config().approvals.safe ? ', with the read-only list (approvals.safe)' : ''}; approvals.unanalyzable is "${d.config().approvals.unanalyzable}".`,
  ];
  return { remembered, configured, text: lines.join('\n') };
}

/** `rules.remove {n}` (`procctl rules rm N`): forget remembered answer N; the approver credential only. */
export function removeRule(d: Daemon, ctx: CallContext, params: Record<string, unknown>) {
  const { n, ...extra } = params;
  const unknown = Object.keys(extra)[0];
  if (unknown) throw invalid(`invalid rules.remove params: unknown parameter "${unknown}"`, { path: [unknown], schema: true });
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 1) throw invalid('rules.remove needs n: the number procctl rules shows', { path: ['n'], schema: true });
  if (ctx.caller?.approver !== true) throw forbidden('a remembered answer is forgotten by a person: procctl rules rm N sends the approver credential');
  const gone = d.remembered.remove(n);
  if (!gone) throw notFound(`there is no remembered answer ${n}; procctl rules lists them`);
  return { removed: { ...gone, at: new Date(gone.at).toISOString() }, text: `Forgot remembered answer ${n}: allow ${gone.kind} "${gone.words.join(' ')}" in scope ${gone.scope}.` };
}
