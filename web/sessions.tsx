import { Component } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { keyOf, type Row } from './connection.js';
import { breakable, bytes, counted, decisionOf, readinessOf, runtime, sessionHref, statusOf, statusText, STATUS_WORDS } from './format.js';
import { columnsOf, type Column } from './columns.js';
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

const cpu = (r: Row) => (typeof r.resources?.cpuMs === 'number' ? `${(r.resources.cpuMs / 1000).toFixed(1)}s` : '');
/** The TCP ports it listens on: `8000` on every address, `127.0.0.1:8000` on one (as procctl ps writes them). */
function ports(r: Row): string {
  const list = r.ports as { address: string; port: number }[] | undefined;
  if (!list?.length) return '';
  const words = list.map((p) => (p.address === '0.0.0.0' || p.address === '::' ? String(p.port) : p.address.includes(':') ? `[${p.address}]:${p.port}` : `${p.address}:${p.port}`));
  return [...new Set(words)].join(', ');
}

const changes = (r: Row) => (r.changes?.pending ? `${counted(r.changes.files, 'file')} pending` : String(r.changes?.state ?? ''));

/**
 * The table's columns, in order. Ids, statuses, scopes, hosts and the short figures never wrap
 * ("fit": as wide as the widest shown), a long name wraps between its words; the command (its
 * workdir under it), the readiness and the refusals take what is left and wrap, the command most
 * ("share"). A column no shown row has a value in is left out.
 */
const COLUMNS: Column<Row>[] = [
  { cls: 'host', head: 'Host', fit: 'text', text: (r) => r.host, fleet: true },
  { cls: 'status', head: 'Status', fit: 'bold', text: statusText },
  { cls: 'scope', head: 'Scope', fit: 'text', text: (r) => r.scope },
  { cls: 'id', head: 'Id', fit: 'code', text: (r) => r.sessionId },
  { cls: 'name', head: 'Name', fit: 'text', text: (r) => r.name ?? '', wrapsPast: 9 },
  { cls: 'cmd', head: 'Command, in its workdir', share: 4, minRem: 12, stacks: true },
  { cls: 'ready', head: 'Ready', share: 1, minRem: 5, text: readinessOf, optional: true },
  { cls: 'rule', head: 'Rules', fit: 'text', text: decisionOf, optional: true },
  { cls: 'runtime', head: 'Runtime', fit: 'text', widest: '00h 00m' },
  { cls: 'cpu', head: 'CPU', fit: 'text', text: cpu, optional: true },
  { cls: 'mem', head: 'Memory', fit: 'text', text: (r) => bytes(r.resources?.memoryBytes), widest: '1023 MiB', optional: true },
  { cls: 'changes', head: 'Changes', fit: 'text', text: changes, optional: true },
  { cls: 'ports', head: 'Ports', fit: 'text', text: ports, wrapsPast: 8, optional: true },
  { cls: 'net', head: 'Network refused', share: 1, minRem: 5, text: refusals, optional: true },
];

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
        <td class="status">{statusText(r)}</td>
        <td class="scope">{r.scope}</td>
        <td class="id"><a href={sessionHref(r.host, r.sessionId)}><code>{r.sessionId}</code></a></td>
        <td class="name"><a href={sessionHref(r.host, r.sessionId)}>{breakable(r.name ?? '')}</a></td>
        <td class="cmd"><code>{r.command}</code><div class="cwd">{breakable(r.cwd ?? '')}</div></td>
        <td class="ready">{readinessOf(r)}</td>
        <td class="rule" title={r.decision?.reason ?? ''}>{decisionOf(r)}</td>
        <Runtime row={r} />
        <td class="cpu">{cpu(r)}</td>
        <td class="mem">{bytes(r.resources?.memoryBytes)}</td>
        <td class="changes">{changes(r)}</td>
        <td class="ports">{ports(r)}</td>
        <td class="net">{refusals(r)}</td>
      </tr>
    );
  }
}

/** The width of an element's box, followed as the window changes (0 before it is laid out). */
function useWidth(ref: { current: HTMLElement | null }): number {
  const [width, setWidth] = useState(0);
  useEffect(() => {
    if (!ref.current) return;
    const seen = new ResizeObserver(([e]) => setWidth(Math.floor(e.contentRect.width)));
    seen.observe(ref.current);
    return () => seen.disconnect();
  }, [ref.current]);
  return width;
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
  // The columns' widths, from what is shown: the table lays out again only when they change.
  const box = useRef<HTMLDivElement>(null);
  const across = useWidth(box);
  const layout = columnsOf(COLUMNS, shown, fleet, across);
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
            {STATUSES.map((s) => <option value={s}>{STATUS_WORDS[s]}</option>)}
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
      <div class="wide" ref={box}>
        <table class={`sessions${layout.stacked ? ' stacked' : ''} ${layout.hidden.map((c) => `no-${c}`).join(' ')}`} style={layout.style}>
          <thead>
            <tr>
              {COLUMNS.filter((c) => fleet || !c.fleet).map((c) => <th scope="col" class={c.cls}>{c.head}</th>)}
            </tr>
          </thead>
          <tbody>
            {shown.map((r) => <SessionRow key={keyOf(r.host, r.sessionId)} r={r} fleet={fleet} />)}
          </tbody>
        </table>
      </div>
      {matching.length > shown.length && (
        <p>
          <button type="button" onClick={() => setRoom(room + PAGE)}>Show {Math.min(PAGE, matching.length - shown.length)} more of {matching.length - shown.length}</button>
        </p>
      )}
      {rows.length === 0 && <p class="muted">No sessions yet.</p>}
    </section>
  );
}
