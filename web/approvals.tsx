import { useEffect, useState } from 'preact/hooks';
import { act, read, type Approval } from './connection.js';
import { sessionHref } from './format.js';
import { useLive } from './hooks.js';

interface Part {
  text: string;
  decision: string;
  reason?: string;
  rule?: number;
}

/** How the rules judged the command, part by part (policy.check in its scope). */
function Parts({ a }: { a: Approval }) {
  const [parts, setParts] = useState<Part[] | undefined>();
  useEffect(() => {
    read('policy', { command: a.command, scope: a.scope, host: a.host }).then((j) => setParts(Array.isArray(j.parts) ? j.parts : []), () => setParts([]));
  }, [a.sessionId]);
  if (!parts?.length) return null;
  return (
    <table class="parts">
      <caption>How the rules judge it</caption>
      <thead><tr><th scope="col">Part</th><th scope="col">Decision</th><th scope="col">Rule</th><th scope="col">Why</th></tr></thead>
      <tbody>
        {parts.map((p) => (
          <tr class={`dec-${p.decision}`}><td class="part"><code>{p.text}</code></td><td class="decision">{p.decision}</td><td class="rule">{typeof p.rule === 'number' ? `rule ${p.rule}` : ''}</td><td>{p.reason ?? ''}</td></tr>
        ))}
      </tbody>
    </table>
  );
}

function Pending({ a, hostShown }: { a: Approval; hostShown: boolean }) {
  const [said, setSaid] = useState('');
  const [busy, setBusy] = useState(false);
  const changes = a.interrupt?.kind === 'changes';
  const answer = async (input: Record<string, unknown>) => {
    setBusy(true);
    try {
      const r = await act(a.host, 'resume', a.sessionId, { input });
      setSaid(String(r.text ?? '').split('\n')[0]);
    } catch (e) {
      setSaid((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  const label = `${changes ? `changes of ${a.command}` : a.command}${hostShown ? ` on ${a.host}` : ''}`;
  return (
    <li class="approval" data-session={a.sessionId} data-host={a.host} aria-label={`approval for ${label}`}>
      <div class="what">
        {hostShown && <span class="on-host">{a.host}</span>} <span class="scope">{a.scope}</span> <code class="cmd">{a.command}</code>{' '}
        <a href={sessionHref(a.host, a.sessionId)}>{a.sessionId}</a>
      </div>
      <pre class="reason">{String(a.interrupt?.reason ?? '')}</pre>
      {!changes && <Parts a={a} />}
      <div class="actions">
        <button type="button" class="yes" disabled={busy} onClick={() => answer({ confirm: true })}>{changes ? 'Apply' : 'Approve'}</button>
        <button type="button" class="no" disabled={busy} onClick={() => answer({ confirm: false })}>{changes ? 'Discard' : 'Deny'}</button>
        {!changes && (
          <>
            <button type="button" disabled={busy} onClick={() => answer({ confirm: true, remember: 'command' })} title="Approve, and allow this exact command in this scope from now on">Approve and remember this command</button>
            <button type="button" disabled={busy} onClick={() => answer({ confirm: true, remember: 'prefix' })} title="Approve, and allow its name and first word in this scope from now on">Approve and remember the prefix</button>
          </>
        )}
        {changes && <a href={sessionHref(a.host, a.sessionId)}>See the diff</a>}
      </div>
      {said && <p role="status" class="said">{said}</p>}
      <p class="muted">expires {String(a.interrupt?.expiresAt ?? '')}</p>
    </li>
  );
}

/** Approvals waiting for the person: commands to run, and held changes to apply. */
export function Approvals() {
  const { approvals, hosts } = useLive('approvals', 'hosts');
  return (
    <section aria-labelledby="approvals-h" class="approvals">
      <h2 id="approvals-h">Approvals waiting ({approvals.length})</h2>
      {approvals.length === 0 ? <p class="muted">None.</p> : <ul>{approvals.map((a) => <Pending key={`${a.host} ${a.sessionId}`} a={a} hostShown={hosts.size > 1} />)}</ul>}
    </section>
  );
}
