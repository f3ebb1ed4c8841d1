import { useEffect, useState } from 'preact/hooks';
import { keyOf, read } from './connection.js';
import { bytes, counted, historyHref, sessionHref, statusText, STATUS_WORDS } from './format.js';
import { useLive } from './hooks.js';

// The daemon's audit trail (SPEC §18) through the `history` RPC, as `procctl history` shows it:
// sessions long after they were forgotten, who asked and who allowed them. Text only.

const PAGE = 50;
const STATUSES = ['running', 'approval_required', 'completed', 'failed', 'denied'];

interface Filters {
  host: string;
  since: string;
  ofScope: string;
  status: string;
  grep: string;
}

interface Entry {
  sessionId: string;
  scope: string;
  startedAt: string;
  command: string;
  workdir: string;
  status: string;
  client?: { kind?: string; name?: string } | null;
  peer?: { uid?: number | null; pid?: number | null; exe?: string | null } | null;
  decision?: { action: string; part: string; rule: number | null; reason: string };
  answers?: { kind: string; answer: string; by: string }[];
  end?: { exit: number | null; signal: string | null; reason: string | null };
}

const when = (iso: unknown) => String(iso ?? '').replace('T', ' ').replace(/\.\d+Z$/, 'Z');

/** Who asked: the client it named and the process the kernel named. */
function askedBy(e: Pick<Entry, 'client' | 'peer'>): string {
  const client = e.client?.kind ? `${e.client.kind}${e.client.name ? ` ${e.client.name}` : ''}` : 'unknown client';
  const p = e.peer;
  return p ? `${client}, uid ${p.uid ?? '?'} pid ${p.pid ?? '?'}${p.exe ? ` ${p.exe}` : ''}` : client;
}

/** Who or what allowed it: a person's answers, else the rule's decision. */
function allowedBy(e: Entry): string {
  if (e.answers?.length) return e.answers.map((a) => `${a.answer === 'approve' ? 'approved' : 'refused'} by ${a.by}`).join(', ');
  if (!e.decision) return '';
  return `${e.decision.action}${e.decision.rule !== null ? ` (rule ${e.decision.rule})` : ''}: ${e.decision.reason}`;
}

/** How it ended, in the words of the sessions table ("completed (2)", "failed (SIGTERM, user)"). */
function ended(e: Entry): string {
  return statusText({ status: e.status, exitCode: e.end?.exit, signal: e.end?.signal, reason: e.end?.reason });
}

/** Kept while the page is open, so coming back from a session's story finds the same filters and page. */
let kept: { filters: Filters; offset: number } = { filters: { host: '', since: '', ofScope: '', status: '', grep: '' }, offset: 0 };

/** Sessions from a host's audit trail, newest first, filtered and paged. */
export function History() {
  const { hosts } = useLive();
  const names = [...hosts.keys()];
  const [draft, setDraft] = useState<Filters>(kept.filters);
  const [applied, setApplied] = useState<Filters>(kept.filters);
  const [offset, setOffset] = useState(kept.offset);
  const [answer, setAnswer] = useState<{ sessions: Entry[]; total: number; offset: number } | undefined>();
  const [error, setError] = useState('');
  const host = applied.host || names[0] || '';
  useEffect(() => {
    kept = { filters: applied, offset };
    if (!host) return;
    let current = true;
    setError('');
    read('history', { host, since: applied.since, ofScope: applied.ofScope, status: applied.status, grep: applied.grep, offset, limit: PAGE }).then(
      (a) => current && setAnswer(a),
      (e) => current && (setAnswer(undefined), setError((e as Error).message)),
    );
    return () => void (current = false);
  }, [host, applied, offset]);
  const field = (k: keyof Filters) => (e: Event) => setDraft({ ...draft, [k]: (e.target as HTMLInputElement | HTMLSelectElement).value });
  const shown = answer?.sessions ?? [];
  return (
    <section aria-labelledby="history-h" class="history">
      <h2 id="history-h">History</h2>
      <form
        class="filters"
        role="search"
        onSubmit={(e) => {
          e.preventDefault();
          setApplied(draft);
          setOffset(0);
        }}
      >
        {names.length > 1 && (
          <label>
            Host{' '}
            <select value={draft.host || names[0]} onChange={field('host')}>
              {names.map((h) => <option value={h}>{h}</option>)}
            </select>
          </label>
        )}
        <label>
          Since <input type="text" size={12} value={draft.since} placeholder="2h, 7d, or a time" onInput={field('since')} />
        </label>
        <label>
          Scope <input type="text" size={10} value={draft.ofScope} placeholder="every scope" onInput={field('ofScope')} />
        </label>
        <label>
          Status{' '}
          <select value={draft.status} onChange={field('status')}>
            <option value="">all</option>
            {STATUSES.map((s) => <option value={s}>{STATUS_WORDS[s]}</option>)}
          </select>
        </label>
        <label>
          Text <input type="search" value={draft.grep} placeholder="command, workdir, id, scope" onInput={field('grep')} />
        </label>
        <button type="submit">Show</button>
      </form>
      {error && <p class="banner warn" role="alert">{error}</p>}
      {answer && (
        <p class="muted" aria-live="polite">
          {answer.total === 0 ? 'No sessions on record match.' : `${answer.offset + 1}–${answer.offset + shown.length} of ${answer.total}${names.length > 1 ? ` on ${host}` : ''}`}
        </p>
      )}
      {shown.length > 0 && (
        <table class="history-list">
          <thead>
            <tr>
              <th scope="col">Started</th>
              <th scope="col">Session</th>
              <th scope="col">Scope</th>
              <th scope="col" class="status">Status</th>
              <th scope="col">Asked by</th>
              <th scope="col">Allowed</th>
              <th scope="col">Command</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((e) => (
              <tr key={e.sessionId} data-session={e.sessionId} class={`st-${e.status}`}>
                <td class="when">{when(e.startedAt)}</td>
                <td class="id"><a href={historyHref(host, e.sessionId)}><code>{e.sessionId}</code></a></td>
                <td class="scope">{e.scope}</td>
                <td class="status">{ended(e)}</td>
                <td class="asked">{askedBy(e)}</td>
                <td class="allowed">{allowedBy(e)}</td>
                <td class="cmd"><code>{e.command}</code></td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {answer && answer.total > PAGE && (
        <div class="actions">
          <button type="button" disabled={offset === 0} onClick={() => setOffset(Math.max(0, offset - PAGE))}>Newer</button>
          <button type="button" disabled={offset + shown.length >= answer.total} onClick={() => setOffset(offset + PAGE)}>Older</button>
        </div>
      )}
    </section>
  );
}

type TrailRecord = Record<string, any>;

/** One record of a session's story, in words (as `procctl history ID` says it). */
function told(r: TrailRecord): [string, string] {
  switch (r.type) {
    case 'session':
      return ['asked', `${String(r.command)} (in ${String(r.workdir)}, scope ${String(r.scope)}, by ${askedBy(r)}; sandbox ${String(r.sandbox)}, changes ${String(r.changes)}, host ${String(r.host)})`];
    case 'decision':
      return ['decided', `${String(r.action)}: ${String(r.part)} (${r.rule === null || r.rule === undefined ? '' : `rule ${String(r.rule)}: `}${String(r.reason)})`];
    case 'answer':
      return ['answered', `${r.answer === 'approve' ? 'approved' : 'refused'} (${String(r.kind)}) by ${String(r.by)}`];
    case 'network_denied':
      return ['refused', `network to ${String(r.host)}, ${counted(r.count, 'time')}`];
    case 'changes':
      return ['changes', `${String(r.action)}: ${counted(r.files, 'file')}`];
    case 'end': {
      const res = r.resources as { cpuMs?: number; memoryPeakBytes?: number } | null;
      const how = `${String(r.status)}${r.exit !== null ? ` exit ${String(r.exit)}` : ''}${r.signal ? ` ${String(r.signal)}` : ''}${r.reason ? ` (${String(r.reason)})` : ''}`;
      return ['ended', `${how}, ${String(r.runtimeMs)} ms, ${bytes(r.outputBytes)} of output${res ? `, ${res.cpuMs} ms CPU, ${bytes(res.memoryPeakBytes)} peak memory` : ''}`];
    }
    default:
      return [String(r.type), ''];
  }
}

/** One session's whole story from the trail: asked, decided, answered, changes, ended. */
export function HistoryStory({ host, sessionId }: { host: string; sessionId: string }) {
  const { sessions } = useLive();
  const [records, setRecords] = useState<TrailRecord[] | undefined>();
  const [said, setSaid] = useState('');
  useEffect(() => {
    let current = true;
    read('history', { host, sessionId }).then(
      (a) => {
        if (!current) return;
        setRecords(a.records ?? []);
        setSaid(String(a.text ?? ''));
      },
      (e) => current && setSaid((e as Error).message),
    );
    return () => void (current = false);
  }, [host, sessionId]);
  return (
    <section aria-labelledby="story-h" class="story">
      <p><a href="#/history">← History</a></p>
      <h2 id="story-h">Session {sessionId}</h2>
      {sessions.has(keyOf(host, sessionId)) && <p><a href={sessionHref(host, sessionId)}>Its live view</a></p>}
      {records === undefined || records.length === 0 ? (
        <p class="muted" role="status">{said || 'Reading the trail…'}</p>
      ) : (
        <table class="records">
          <thead><tr><th scope="col">Time</th><th scope="col">What</th><th scope="col">Details</th></tr></thead>
          <tbody>
            {records.map((r) => {
              const [what, details] = told(r);
              return <tr class={`rec-${String(r.type)}`}><td>{when(r.time)}</td><td>{what}</td><td>{details}</td></tr>;
            })}
          </tbody>
        </table>
      )}
    </section>
  );
}
