/** Rendering helpers for people: tables, durations, session endings, event lines. */

/** Left-aligned columns separated by two spaces; the last column is not padded. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const line = (cells: string[]) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i])))
      .join('  ')
      .trimEnd();
  return [line(headers), ...rows.map(line)].join('\n');
}

/** A short duration: 850ms, 4.2s, 3m05s, 2h03m, 1d04h. */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '-';
  if (ms < 1000) return `${Math.round(ms)}ms`;
  const s = ms / 1000;
  if (s < 60) return `${s < 10 ? s.toFixed(1) : Math.floor(s)}s`;
  const pad = (n: number) => String(n).padStart(2, '0');
  const total = Math.floor(s);
  const [d, h, m, sec] = [Math.floor(total / 86400), Math.floor(total / 3600) % 24, Math.floor(total / 60) % 60, total % 60];
  if (d > 0) return `${d}d${pad(h)}h`;
  if (h > 0) return `${h}h${pad(m)}m`;
  return `${m}m${pad(sec)}s`;
}

export interface SessionEnd {
  sessionId?: unknown;
  status?: unknown;
  exitCode?: unknown;
  signal?: unknown;
  reason?: unknown;
  paused?: unknown;
}

/** Bytes in a column: 512B, 4.0K, 12M, 1.5G (powers of 1024, as ps and top print them). */
export function bytes(n: number): string {
  if (!Number.isFinite(n) || n < 0) return '-';
  const units = ['B', 'K', 'M', 'G', 'T'];
  let i = 0;
  let v = n;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return i === 0 ? `${v}B` : `${v < 10 ? v.toFixed(1) : Math.round(v)}${units[i]}`;
}

/** The status column of `ps`: the status, and how a finished session ended when that matters. */
export function statusCell(s: SessionEnd): string {
  if (s.status === 'completed') return s.exitCode === 0 ? 'completed' : `completed (${s.exitCode})`;
  if (s.status === 'failed') {
    const how = s.signal ? String(s.signal) : s.exitCode === null || s.exitCode === undefined ? '' : String(s.exitCode);
    const why = s.reason && s.reason !== 'signal' ? String(s.reason) : '';
    const detail = [how, why].filter(Boolean).join(', ');
    return detail ? `failed (${detail})` : 'failed';
  }
  if (s.status === 'denied') return s.reason ? `denied (${String(s.reason)})` : 'denied';
  if (s.paused === true) return s.status === 'running' ? 'paused' : `paused (${String(s.status)})`;
  return String(s.status ?? '?');
}

/** One line saying how a session ended, e.g. `[session ab12 failed (SIGTERM, user)]`. */
export function endNotice(s: SessionEnd): string {
  const cell = statusCell(s);
  const status = s.status === 'completed' && s.exitCode === 0 ? 'completed (exit code 0)' : cell;
  return `[session ${String(s.sessionId)} ${status}]`;
}

/**
 * Split a result's `text` around its `output`, so the output can go to stdout and the notes
 * around it (caps, hints, how it ended) to stderr. A trailing newline of `output` is not in `text`.
 */
export function aroundOutput(text: string, output: string): { before: string; after: string } {
  const body = output.replace(/\n$/, '');
  const at = body ? text.indexOf(body) : -1;
  if (at < 0) return { before: '', after: text };
  return { before: text.slice(0, at).trim(), after: text.slice(at + body.length).trim() };
}

const MAX_EVENT_DATA = 300;

const clock = (at: unknown) => {
  const d = new Date(typeof at === 'string' || typeof at === 'number' ? at : Date.now());
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
};

/** Output data on one line: JSON-escaped, long chunks shortened with a count. */
function oneLine(data: string): string {
  if (data.length <= MAX_EVENT_DATA) return JSON.stringify(data);
  return `${JSON.stringify(data.slice(0, MAX_EVENT_DATA))}… (+${data.length - MAX_EVENT_DATA} chars)`;
}

/** A session event as one readable line: `12:00:01.250  ab12cd34  exited    completed (exit code 0) …`. */
export function eventLine(e: Record<string, unknown>): string {
  const head = `${clock(e.at)}  ${String(e.sessionId ?? '-').padEnd(8)}  ${String(e.type).padEnd(8)}`;
  switch (e.type) {
    case 'started':
      return `${head}  ${String(e.name)} (pid ${e.pid ?? '-'}): ${String(e.command)}`;
    case 'output':
      return `${head}  ${String(e.stream)} ${oneLine(String(e.data ?? ''))}`;
    case 'exited': {
      const summary = typeof e.summary === 'string' ? e.summary : String(e.text ?? '');
      return `${head}  ${statusCell(e)} :: ${summary}`;
    }
    case 'waiting_input':
    case 'approval_required': {
      const i = (e.interrupt ?? {}) as Record<string, unknown>;
      return `${head}  ${String(i.kind ?? '?')}: ${oneLine(String(i.reason ?? ''))}`;
    }
    case 'ready':
      return `${head}  ${String(e.waitFor ?? 'ready')}${typeof e.afterMs === 'number' ? ` (after ${e.afterMs} ms)` : ''}`;
    case 'output_match':
      return `${head}  ${String(e.stream)} ${oneLine(String(e.line ?? ''))}${typeof e.dropped === 'number' ? ` (${e.dropped} more matched, not sent: rate limit)` : ''}`;
    case 'network_denied':
      return `${head}  blocked ${String(e.host)}: ${String(e.reason)}`;
    case 'checkpoint':
      return `${head}  ${String(e.name)}${e.data === null || e.data === undefined ? '' : ` ${JSON.stringify(e.data)}`}`;
    case 'dropped':
      return `${head}  ${String(e.text ?? `${e.count} events were dropped`)}`;
    default: {
      const { at: _at, sessionId: _id, type: _type, subscription: _sub, ...rest } = e;
      const detail = typeof rest.text === 'string' ? rest.text : JSON.stringify(rest);
      return `${head}  ${detail}`;
    }
  }
}
