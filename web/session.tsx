import { useState } from 'preact/hooks';
import { Changes } from './changes.js';
import { UsageChart } from './chart.js';
import { act, keyOf, type Row } from './connection.js';
import { bytes, decisionOf, readinessOf, runtime, statusText } from './format.js';
import { useLive, useNow } from './hooks.js';
import { PipeOutput, TerminalOutput } from './output.js';

const ENDED = new Set(['completed', 'failed', 'denied']);

/** Run an action and say what came of it. */
function useAction(host: string, sessionId: string) {
  const [said, setSaid] = useState('');
  const [busy, setBusy] = useState(false);
  const run = async (action: string, params: Record<string, unknown> = {}) => {
    setBusy(true);
    try {
      const r = await act(host, action, sessionId, params);
      setSaid(String(r.text ?? '').split('\n')[0]);
    } catch (e) {
      setSaid((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  return { said, busy, run };
}

/** The question a running session waits on (a prompt), answered from the page. */
function Prompt({ row }: { row: Row }) {
  const i = row.interrupt;
  const { said, busy, run } = useAction(row.host, row.sessionId);
  const [text, setText] = useState('');
  if (!i || i.kind === 'approval' || i.kind === 'changes') return null;
  const field = i.fields?.[0] ?? {};
  return (
    <section class="prompt" aria-labelledby="prompt-h">
      <h3 id="prompt-h">It waits for input</h3>
      <pre class="reason">{String(i.reason ?? '')}</pre>
      {i.kind === 'confirm' ? (
        <div class="actions">
          <button type="button" disabled={busy} onClick={() => run('resume', { input: { confirm: true } })}>Yes</button>
          <button type="button" disabled={busy} onClick={() => run('resume', { input: { confirm: false } })}>No</button>
        </div>
      ) : (
        <form
          class="actions"
          onSubmit={(e) => {
            e.preventDefault();
            void run('resume', { input: { text } }).then(() => setText(''));
          }}
        >
          {i.kind === 'select' && Array.isArray(field.options) ? (
            <label>
              {String(field.label ?? 'Choose')}{' '}
              <select value={text} onChange={(e) => setText((e.target as HTMLSelectElement).value)}>
                <option value="">—</option>
                {field.options.map((o: { value: string; label: string }) => <option value={o.label}>{`${o.value}) ${o.label}`}</option>)}
              </select>
            </label>
          ) : (
            <label>
              {String(field.label ?? 'Answer')}{' '}
              {i.kind === 'secret' ? (
                <input type="password" value={text} autoComplete="off" onInput={(e) => setText((e.target as HTMLInputElement).value)} />
              ) : (
                <input type="text" value={text} autoComplete="off" onInput={(e) => setText((e.target as HTMLInputElement).value)} />
              )}
            </label>
          )}
          <button type="submit" disabled={busy}>Answer</button>
          <button type="button" disabled={busy} onClick={() => run('resume', { input: { eof: true } })}>Close its input</button>
        </form>
      )}
      {said && <p role="status" class="said">{said}</p>}
    </section>
  );
}

/** Write to its input, or type named keys into its terminal. */
function Input({ row }: { row: Row }) {
  const { said, busy, run } = useAction(row.host, row.sessionId);
  const [data, setData] = useState('');
  const [enter, setEnter] = useState(true);
  const [keys, setKeys] = useState('');
  return (
    <section class="input" aria-label="input">
      <form
        onSubmit={(e) => {
          e.preventDefault();
          void run('write', { data: enter ? `${data}\n` : data }).then(() => setData(''));
        }}
      >
        <label>
          Write to its input <input type="text" value={data} autoComplete="off" onInput={(e) => setData((e.target as HTMLInputElement).value)} />
        </label>
        <label><input type="checkbox" checked={enter} onChange={(e) => setEnter((e.target as HTMLInputElement).checked)} /> then Enter</label>
        <button type="submit" disabled={busy}>Send</button>
        <button type="button" disabled={busy} onClick={() => run('write', { eof: true })}>Close input (EOF)</button>
      </form>
      {row.pty && (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void run('send-keys', { keys: keys.split(/\s+/).filter(Boolean) }).then(() => setKeys(''));
          }}
        >
          <label>
            Keys <input type="text" value={keys} placeholder="C-c Enter Up F1" autoComplete="off" onInput={(e) => setKeys((e.target as HTMLInputElement).value)} />
          </label>
          <button type="submit" disabled={busy}>Send keys</button>
        </form>
      )}
      {said && <p role="status" class="said">{said}</p>}
    </section>
  );
}

/** One session: its record, its output live, what can be done to it. */
export function SessionView({ host, sessionId }: { host: string; sessionId: string }) {
  const { sessions, hosts, version } = useLive();
  const now = useNow();
  const row = sessions.get(keyOf(host, sessionId));
  const { said, busy, run } = useAction(host, sessionId);
  if (!row) {
    return (
      <section>
        <p><a href="#/">← All sessions</a></p>
        <p class="muted">No session {sessionId} (yet, or any more).</p>
      </section>
    );
  }
  const ended = ENDED.has(row.status);
  const started = row.status !== 'approval_required' && row.status !== 'denied';
  return (
    <section class="session" aria-labelledby="session-h">
      <p><a href="#/">← All sessions</a></p>
      <h2 id="session-h">
        <span class="status">{statusText(row)}</span> <code>{row.command}</code>
      </h2>
      <dl class="record">
        {hosts.size > 1 && <div><dt>host</dt><dd>{row.host}</dd></div>}
        <div><dt>id</dt><dd>{row.sessionId}</dd></div>
        <div><dt>scope</dt><dd>{row.scope}</dd></div>
        <div><dt>workdir</dt><dd>{row.cwd}</dd></div>
        {row.pid !== null && <div><dt>pid</dt><dd>{String(row.pid)}</dd></div>}
        <div><dt>runtime</dt><dd>{runtime(row, now)}</dd></div>
        {row.exitCode !== undefined && row.exitCode !== null && <div><dt>exit</dt><dd>{String(row.exitCode)}</dd></div>}
        {row.signal && <div><dt>signal</dt><dd>{row.signal}</dd></div>}
        {row.reason && <div><dt>reason</dt><dd>{row.reason}</dd></div>}
        {row.readiness && <div><dt>readiness</dt><dd>{readinessOf(row)}</dd></div>}
        {row.decision && <div><dt>rules</dt><dd>{`${decisionOf(row)}: ${row.decision.part} (${row.decision.reason})`}</dd></div>}
        {row.stop?.by && <div><dt>stopped by</dt><dd>{row.stop.by}</dd></div>}
        {row.resources && <div><dt>CPU</dt><dd>{`${(Number(row.resources.cpuMs ?? 0) / 1000).toFixed(1)}s`}</dd></div>}
        {row.resources && <div><dt>memory</dt><dd>{bytes(row.resources.memoryBytes)} (peak {bytes(row.resources.memoryPeakBytes)})</dd></div>}
        {row.checkpoint && <div><dt>checkpoint</dt><dd>{String(row.checkpoint.name ?? '')}</dd></div>}
      </dl>
      <div class="actions">
        <button type="button" disabled={busy || ended || row.status === 'approval_required'} onClick={() => run('kill')}>Kill</button>
        {row.paused ? (
          <button type="button" disabled={busy || ended} onClick={() => run('continue')}>Continue</button>
        ) : (
          <button type="button" disabled={busy || ended || row.status === 'approval_required'} onClick={() => run('pause')}>Pause</button>
        )}
      </div>
      {said && <p role="status" class="said">{said}</p>}
      {row.resources && !ended && <UsageChart usageKey={keyOf(host, sessionId)} version={version} />}
      <Prompt row={row} />
      {row.changes && <Changes host={host} sessionId={sessionId} version={JSON.stringify(row.changes)} />}
      {started && (row.pty ? <TerminalOutput host={host} sessionId={sessionId} ended={ended} /> : <PipeOutput host={host} sessionId={sessionId} />)}
      {!ended && started && <Input row={row} />}
    </section>
  );
}
