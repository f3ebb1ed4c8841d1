// Small formatters shared by the views: text only, never markup.

export function bytes(n: unknown): string {
  if (typeof n !== 'number') return '';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let v = n;
  let u = 0;
  while (v >= 1024 && u < units.length - 1) {
    v /= 1024;
    u++;
  }
  return `${v >= 10 || u === 0 ? Math.round(v) : v.toFixed(1)} ${units[u]}`;
}

export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m ${s % 60}s`;
  const h = Math.floor(m / 60);
  return `${h}h ${m % 60}m`;
}

/** How long a session has run: to its end, or to now. */
export function runtime(row: Record<string, any>, now: number): string {
  if (!row.startedAt) return '';
  const start = Date.parse(row.startedAt);
  const end = row.endedAt ? Date.parse(row.endedAt) : now;
  return duration(end - start);
}

/** The status a person reads: paused and waiting shown as such. */
export function statusOf(row: { status: string; paused?: boolean }): string {
  return row.paused ? 'paused' : row.status;
}

/** Whether what its waitFor waits for holds: "ready", or what it still waits for. */
export function readinessOf(row: Record<string, any>): string {
  const r = row.readiness as { waitingFor: string; ready: boolean } | undefined;
  if (!r) return '';
  return r.ready ? `ready: ${r.waitingFor}` : `waiting for ${r.waitingFor}`;
}

/** How the rules judged it: the action and the rule that decided ("deny by rule 2"). */
export function decisionOf(row: Record<string, any>): string {
  const d = row.decision as { action: string; rule?: number; reason: string } | undefined;
  if (!d) return '';
  return `${d.action}${typeof d.rule === 'number' ? ` by rule ${d.rule}` : ''}`;
}

/** The page's address of one session of one host. */
export function sessionHref(host: string, sessionId: string): string {
  return `#/s/${encodeURIComponent(host)}/${encodeURIComponent(sessionId)}`;
}

/** The page's address of one session's story in a host's audit trail. */
export function historyHref(host: string, sessionId: string): string {
  return `#/history/${encodeURIComponent(host)}/${encodeURIComponent(sessionId)}`;
}
