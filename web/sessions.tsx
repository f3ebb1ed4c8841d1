import { Component } from 'preact';
import { useMemo, useState } from 'preact/hooks';
import { keyOf, type Row } from './connection.js';
import { bytes, decisionOf, readinessOf, runtime, sessionHref, statusOf } from './format.js';
import { useLive, useNow } from './hooks.js';

/** Rows drawn at first; "Show more" adds as many again. */
const PAGE = 200;

const STATUSES = ['running', 'waiting_input', 'approval_required', 'paused', 'completed', 'failed', 'denied'];

function matches(r: Row, host: string, status: string, scope: string, text: string): boolean {
  if (host && r.host !== host) return false;
  if (status && statusOf(r) !== status) return false;
  if (scope && r.scope !== scope) return false;
  if (!text) return true;
  const t = text.toLowerCase();
  return [r.sessionId, r.name, r.command, r.cwd].some((v) => typeof v === 'string' && v.toLowerCase().includes(t));
}

/** Refusals its network proxy counted: "host ×N" each. */
function refusals(r: Row): string {
  const denied = r.network?.denied as { host: string; count: number }[] | undefined;
  return denied?.length ? denied.map((d) => `${d.host} ×${d.count}`).join(', ') : '';
}

/** How long it has run, moving once a second while it runs: only this cell re-renders as it ticks. */
function Runtime({ row }: { row: Row }) {
  const now = useNow(!row.endedAt);
  return <td class="runtime">{runtime(row, now)}</td>;
}

/**
 * One session's row, drawn again only when its row changes: a push replaces the rows that changed
 * and keeps the others' objects, so a refresh of a thousand sessions redraws the few that moved.
 */
class SessionRow extends Component<{ r: Row; fleet: boolean }> {
  shouldComponentUpdate(next: { r: Row; fleet: boolean }): boolean {
    return next.r !== this.props.r || next.fleet !== this.props.fleet;
  }

  render({ r, fleet }: { r: Row; fleet: boolean }) {
    return (
      <tr data-session={r.sessionId} data-host={r.host} class={`st-${statusOf(r)}`}>
        {fleet && <td class="host">{r.host}</td>}
        <td><span class="status">{statusOf(r)}</span>{r.status === 'completed' || r.status === 'failed' ? ` ${r.exitCode ?? r.signal ?? ''}` : ''}</td>
        <td>{r.scope}</td>
        <td><a href={sessionHref(r.host, r.sessionId)}>{r.name || r.sessionId}</a></td>
        <td class="cmd"><code>{r.command}</code></td>
        <td class="cwd">{r.cwd}</td>
        <td class="ready">{readinessOf(r)}</td>
        <td class="rule" title={r.decision?.reason ?? ''}>{decisionOf(r)}</td>
        <Runtime row={r} />
        <td>{typeof r.resources?.cpuMs === 'number' ? `${(r.resources.cpuMs / 1000).toFixed(1)}s` : ''}</td>
        <td>{bytes(r.resources?.memoryBytes)}</td>
        <td>{r.changes?.pending ? `${r.changes.files} file(s) pending` : r.changes?.state ?? ''}</td>
        <td>{refusals(r)}</td>
      </tr>
    );
  }
}

/** Sessions of every scope (and every host of a fleet), newest first, filtered by host, status, scope and text. */
export function Sessions() {
  const { sessions, hosts } = useLive('sessions', 'hosts');
  const fleet = hosts.size > 1;
  const [host, setHost] = useState('');
  const [status, setStatus] = useState('');
  const [scope, setScope] = useState('');
  const [text, setText] = useState('');
  // Start times are ISO strings of one form: compared as strings (localeCompare is many times slower).
  const rows = useMemo(() => [...sessions.values()].sort((a, b) => (a.startedAt === b.startedAt ? 0 : String(a.startedAt) < String(b.startedAt) ? 1 : -1)), [sessions]);
  const scopes = useMemo(() => [...new Set(rows.map((r) => r.scope))].sort(), [rows]);
  const [room, setRoom] = useState(PAGE);
  const matching = rows.filter((r) => matches(r, host, status, scope, text));
  // A thousand rows stay smooth: the newest are drawn, the rest on asking.
  const shown = matching.slice(0, room);
  return (
    <section aria-labelledby="sessions-h">
      <h2 id="sessions-h">Sessions</h2>
      <div class="filters" role="search">
        {fleet && (
          <label>
            Host{' '}
            <select value={host} onChange={(e) => setHost((e.target as HTMLSelectElement).value)}>
              <option value="">all</option>
              {[...hosts.keys()].map((h) => <option value={h}>{h}</option>)}
            </select>
          </label>
        )}
        <label>
          Status{' '}
          <select value={status} onChange={(e) => setStatus((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            {STATUSES.map((s) => <option value={s}>{s}</option>)}
          </select>
        </label>
        <label>
          Scope{' '}
          <select value={scope} onChange={(e) => setScope((e.target as HTMLSelectElement).value)}>
            <option value="">all</option>
            {scopes.map((s) => <option value={s}>{s}</option>)}
          </select>
        </label>
        <label>
          Search <input type="search" value={text} placeholder="id, name, command, workdir" onInput={(e) => setText((e.target as HTMLInputElement).value)} />
        </label>
        <span class="muted" aria-live="polite">{matching.length} of {rows.length}</span>
      </div>
      <table class={fleet ? 'sessions fleet' : 'sessions'}>
        <thead>
          <tr>
            {fleet && <th scope="col">Host</th>}
            <th scope="col">Status</th>
            <th scope="col">Scope</th>
            <th scope="col">Name</th>
            <th scope="col">Command</th>
            <th scope="col">Workdir</th>
            <th scope="col">Ready</th>
            <th scope="col">Rules</th>
            <th scope="col">Runtime</th>
            <th scope="col">CPU</th>
            <th scope="col">Memory</th>
            <th scope="col">Changes</th>
            <th scope="col">Network refused</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((r) => <SessionRow key={keyOf(r.host, r.sessionId)} r={r} fleet={fleet} />)}
        </tbody>
      </table>
      {matching.length > shown.length && (
        <p>
          <button type="button" onClick={() => setRoom(room + PAGE)}>Show {Math.min(PAGE, matching.length - shown.length)} more of {matching.length - shown.length}</button>
        </p>
      )}
      {rows.length === 0 && <p class="muted">No sessions yet.</p>}
    </section>
  );
}
