import { useMemo, useRef } from 'preact/hooks';
import { type Row, type ShellRow } from './connection.js';
import { columnsOf, type Column } from './columns.js';
import { breakable, duration, sessionHref, statusOf, statusText } from './format.js';
import { useLive, useNow } from './hooks.js';

/** Commands listed under a shell; older ones are in the sessions table below. */
const SHOWN_COMMANDS = 10;

const lastUsed = (sh: ShellRow, now: number) => `${duration(Math.max(0, now - Date.parse(sh.lastUsedAt)))} ago`;

/** The shells table's columns (as the sessions table's: web/columns.ts sizes them from what is shown). */
const COLUMNS: Column<ShellRow>[] = [
  { cls: 'host', head: 'Host', fit: 'text', text: (sh) => sh.host, fleet: true },
  { cls: 'name', head: 'Shell', fit: 'code', text: (sh) => sh.name },
  { cls: 'scope', head: 'Scope', fit: 'text', text: (sh) => sh.scope },
  { cls: 'status', head: 'State', fit: 'bold', text: (sh) => sh.state },
  { cls: 'cmd', head: 'Workdir', share: 4, minRem: 10 },
  { cls: 'count', head: 'Commands run', fit: 'text', text: (sh) => String(sh.commands) },
  { cls: 'runtime', head: 'Last used', fit: 'text', widest: '00h 00m ago' },
];

/** When it was last used, moving once a second. */
function LastUsed({ sh }: { sh: ShellRow }) {
  const now = useNow(true);
  return <td class="runtime">{lastUsed(sh, now)}</td>;
}

/** A shell's commands, newest first: each one's session, its status and its command. */
function Commands({ sh, sessions }: { sh: ShellRow; sessions: Row[] }) {
  const since = Date.parse(sh.createdAt);
  const mine = sessions.filter((r) => r.host === sh.host && r.scope === sh.scope && r.shell?.name === sh.name && !(Date.parse(String(r.startedAt)) < since));
  if (mine.length === 0) return null;
  const shown = mine.slice(0, SHOWN_COMMANDS);
  return (
    <tr class="shell-commands" data-shell={sh.name}>
      <td>
        <ul aria-label={`commands of shell ${sh.name}`}>
          {shown.map((r) => (
            <li data-session={r.sessionId} class={`st-${statusOf(r)}`}>
              <a href={sessionHref(r.host, r.sessionId)}><code>{r.sessionId}</code></a> <span class="status">{statusText(r)}</span> <code class="command">{r.command}</code>
            </li>
          ))}
        </ul>
        {mine.length > shown.length && <p class="muted">and {mine.length - shown.length} earlier, in the sessions below</p>}
      </td>
    </tr>
  );
}

/** The persistent shells (SPEC §20) of every scope and host, each with its commands under it; nothing when there are none. */
export function Shells() {
  const { shells, sessions, hosts } = useLive('shells', 'sessions', 'hosts');
  const fleet = hosts.size > 1;
  const box = useRef<HTMLDivElement>(null);
  const rows = useMemo(() => [...sessions.values()].filter((r) => r.shell).sort((a, b) => (String(a.startedAt) < String(b.startedAt) ? 1 : -1)), [sessions]);
  if (shells.length === 0) return null;
  const layout = columnsOf(COLUMNS, shells, fleet, box.current?.clientWidth ?? 0);
  return (
    <section aria-labelledby="shells-h">
      <h2 id="shells-h">Shells</h2>
      <div class="wide" ref={box}>
        <table class="sessions shells" style={layout.style}>
          <thead>
            <tr>
              {COLUMNS.filter((col) => fleet || !col.fleet).map((col) => <th scope="col" class={col.cls}>{col.head}</th>)}
            </tr>
          </thead>
          <tbody>
            {shells.map((sh) => [
              <tr data-shell={sh.name} data-host={sh.host} data-scope={sh.scope} data-session={sh.sessionId ?? undefined} class={`shell-${sh.state}`}>
                {fleet && <td class="host">{sh.host}</td>}
                <td class="name"><code>{sh.name}</code></td>
                <td class="scope">{sh.scope}</td>
                <td class="status">{sh.state}</td>
                <td class="cmd">{breakable(sh.cwd)}</td>
                <td class="count">{sh.commands}</td>
                <LastUsed sh={sh} />
              </tr>,
              <Commands sh={sh} sessions={rows} />,
            ])}
          </tbody>
        </table>
      </div>
    </section>
  );
}
