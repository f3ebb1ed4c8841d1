import type { Registry } from '../session/registry.js';

/**
 * What the registry holds now, as the metrics read it (SPEC §18): the Prometheus exporter when
 * scraped, and the OpenTelemetry export at each reading. One place, so the two say the same.
 */

/** Sessions by state and scope. */
export function sessionsByState(sessions: Registry): { state: string; scope: string; n: number }[] {
  const counts = new Map<string, { state: string; scope: string; n: number }>();
  for (const s of sessions.all()) {
    const key = `${s.status}\u0000${s.scope}`;
    const c = counts.get(key) ?? { state: s.status, scope: s.scope, n: 0 };
    c.n++;
    counts.set(key, c);
  }
  return [...counts.values()];
}

/** Approvals waiting for a person: commands to run, and held changes to apply. */
export function approvalsPending(sessions: Registry): number {
  let n = 0;
  for (const s of sessions.all()) if (s.awaitingApproval || s.interrupt?.kind === 'changes') n++;
  return n;
}

/** Review sessions whose changes wait to be applied or discarded. */
export function changesPending(sessions: Registry): number {
  let n = 0;
  for (const s of sessions.all()) if (s.changes?.pending) n++;
  return n;
}
