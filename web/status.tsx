import type { DaemonView } from './connection.js';
import { useLive } from './hooks.js';
import { duration } from './format.js';

/** One daemon's figures: version, pid, uptime, totals, modes (the reason on hover). */
function Figures({ s, label }: { s: Record<string, any>; label: string }) {
  const sandbox = s.sandbox ? `${s.sandbox.mode}${s.sandbox.available === false ? ' (unavailable)' : ''}` : '';
  const cgroups = s.cgroups ? String(s.cgroups.mode ?? s.cgroups.how ?? '') : '';
  return (
    <dl class="daemon" aria-label={label}>
      <div><dt>procctld</dt><dd>{String(s.version ?? '')}</dd></div>
      <div><dt>pid</dt><dd>{String(s.pid ?? '')}</dd></div>
      <div><dt>up</dt><dd>{duration(Number(s.uptimeMs))}</dd></div>
      <div><dt>running</dt><dd>{String(s.sessions?.running ?? '')}</dd></div>
      <div><dt>finished</dt><dd>{String(s.sessions?.finished ?? '')}</dd></div>
      {sandbox && <div><dt>sandbox</dt><dd title={s.sandbox?.reason ?? ''}>{sandbox}</dd></div>}
      {cgroups && <div><dt>cgroups</dt><dd title={s.cgroups?.reason ?? ''}>{cgroups}</dd></div>}
      {s.changes && <div><dt>review</dt><dd title={s.changes.reason ?? ''}>{s.changes.review ? 'available' : 'unavailable'}</dd></div>}
      <Restarted r={s.restarts} />
    </dl>
  );
}

/** The daemon's last restart (SPEC §19): when, how long it took to serve again, what it kept; nothing before the first. */
function Restarted({ r }: { r?: { planned: number; crash: number; lastAt: string | null; lastMs: number | null; adopted: number; lost: number } }) {
  if (!r || r.planned + r.crash === 0 || !r.lastAt) return null;
  const at = new Date(r.lastAt);
  const took = r.lastMs === null ? '' : `, serving again after ${r.lastMs < 1000 ? `${r.lastMs} ms` : `${(r.lastMs / 1000).toFixed(1)} s`}`;
  const title = `${r.planned} planned restart(s), ${r.crash} after a crash; ${r.adopted} session(s) kept, ${r.lost} lost`;
  return (
    <div class="restarted">
      <dt>restarted</dt>
      <dd title={title}>{at.toLocaleTimeString()}{took}</dd>
    </div>
  );
}

/** A host's state in words: connected; refused as the operator (why, and what to set); or disconnected. */
function stateOf(d: DaemonView): string {
  if (d.connected) return 'connected';
  if (d.refused) return `${d.problem ?? 'the daemon does not take the console as the operator'}; trying again`;
  return `disconnected: ${d.problem ?? 'not connected'}; trying again`;
}

/** One host of a fleet: its name, whether the console reaches it, and its figures. */
function Host({ d }: { d: DaemonView }) {
  const name = d.host ?? '';
  return (
    <li class={`host ${d.connected ? 'up' : d.refused ? 'down refused' : 'down'}`} data-host={name}>
      <strong>{name}</strong>{' '}
      <span class="state" role="status">{stateOf(d)}</span>
      {d.connected && d.status && <Figures s={d.status} label={`daemon on ${name}`} />}
    </li>
  );
}

/** The daemons: whether the console reaches each, its version, uptime, modes and totals. */
export function DaemonStatus() {
  const { daemon, hosts, live } = useLive('daemon', 'hosts', 'live');
  if (!live) return <p class="banner warn" role="status">{daemon.problem && !daemon.connected ? daemon.problem : 'Reconnecting to the console…'}</p>;
  const views = [...hosts.values()];
  if (views.length > 1) {
    return (
      <ul class="hosts" aria-label="daemons">
        {views.map((d) => <Host key={d.host} d={d} />)}
      </ul>
    );
  }
  const d = views[0];
  if (!d) return <p class="muted">Daemon: connecting…</p>;
  if (!d.connected && d.refused) return <p class="banner warn" role="status">{stateOf(d)}</p>;
  if (!d.connected) return <p class="banner warn" role="status">The daemon cannot be reached: {d.problem ?? 'not connected'}. The console tries again.</p>;
  if (!d.status) return <p class="muted">Daemon: connecting…</p>;
  return <Figures s={d.status} label="daemon status" />;
}
