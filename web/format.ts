// Small formatters shared by the views: text only, never markup.

import { h, type VNode } from 'preact';

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

/** The status a session is filtered and coloured by: its status, or paused. */
export function statusOf(row: { status: string; paused?: boolean }): string {
  return row.paused ? 'paused' : row.status;
}

/** Each status (and paused) in words, as a person reads it; the filters show these. */
export const STATUS_WORDS: Record<string, string> = {
  running: 'running',
  waiting_input: 'waiting for input',
  approval_required: 'waiting for approval',
  paused: 'paused',
  completed: 'completed',
  failed: 'failed',
  denied: 'denied',
};

const words = (status: string) => STATUS_WORDS[status] ?? status.replace(/_/g, ' ');

/**
 * A session's status in words, its end said as `procctl ps` says it (src/cli/render.ts
 * statusCell): "running", "waiting for approval", "completed", "completed (2)", "failed
 * (SIGTERM, user)", "denied (refused)", "paused".
 */
export function statusText(s: { status: string; paused?: boolean; exitCode?: number | null; signal?: string | null; reason?: string | null }): string {
  if (s.status === 'completed') return typeof s.exitCode === 'number' && s.exitCode !== 0 ? `completed (${s.exitCode})` : 'completed';
  if (s.status === 'failed') {
    const how = s.signal ? String(s.signal) : typeof s.exitCode === 'number' ? String(s.exitCode) : '';
    const why = s.reason && s.reason !== 'signal' ? String(s.reason) : '';
    const detail = [how, why].filter(Boolean).join(', ');
    return detail ? `failed (${detail})` : 'failed';
  }
  if (s.status === 'denied') return s.reason ? `denied (${String(s.reason)})` : 'denied';
  if (s.paused) return s.status === 'running' ? 'paused' : `paused (${words(s.status)})`;
  return words(s.status);
}

/** A count and its noun, singular for one: "1 file", "4 files". */
export function counted(n: unknown, noun: string, nouns = `${noun}s`): string {
  return `${String(n)} ${n === 1 ? noun : nouns}`;
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

/** A name or path that may break after each "/" (a <wbr> there) rather than inside a word: text nodes only. */
export function breakable(text: string): (string | VNode)[] {
  return text.split(/(?<=\/)/).flatMap((piece, i) => (i === 0 ? [piece] : [h('wbr', null), piece]));
}
