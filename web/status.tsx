import { useLive } from './hooks.js';
import { duration } from './format.js';

/** The daemon: whether the console reaches it, its version, uptime, modes and totals. */
export function DaemonStatus() {
  const { daemon, live } = useLive();
  const s = daemon.status;
  if (!live) return <p class="banner warn" role="status">{daemon.problem && !daemon.connected ? daemon.problem : 'Reconnecting to the console…'}</p>;
  if (!daemon.connected) return <p class="banner warn" role="status">The daemon cannot be reached: {daemon.problem ?? 'not connected'}. The console tries again.</p>;
  if (!s) return <p class="muted">Daemon: connecting…</p>;
  const sandbox = s.sandbox ? `${s.sandbox.mode}${s.sandbox.available === false ? ' (unavailable)' : ''}` : '';
  const cgroups = s.cgroups ? String(s.cgroups.mode ?? s.cgroups.how ?? '') : '';
  return (
    <dl class="daemon" aria-label="daemon status">
      <div><dt>procctld</dt><dd>{String(s.version ?? '')}</dd></div>
      <div><dt>pid</dt><dd>{String(s.pid ?? '')}</dd></div>
      <div><dt>up</dt><dd>{duration(Number(s.uptimeMs))}</dd></div>
      <div><dt>running</dt><dd>{String(s.sessions?.running ?? '')}</dd></div>
      <div><dt>finished</dt><dd>{String(s.sessions?.finished ?? '')}</dd></div>
      {sandbox && <div><dt>sandbox</dt><dd title={s.sandbox?.reason ?? ''}>{sandbox}</dd></div>}
      {cgroups && <div><dt>cgroups</dt><dd title={s.cgroups?.reason ?? ''}>{cgroups}</dd></div>}
      {s.changes && <div><dt>review</dt><dd title={s.changes.reason ?? ''}>{s.changes.review ? 'available' : 'unavailable'}</dd></div>}
    </dl>
  );
}
