import { useEffect, useState } from 'preact/hooks';
import { act, read } from './connection.js';
import { Diff } from './diff.js';

interface Held {
  files: { path: string; kind: string; size?: number }[];
  diff?: string;
  state: string;
  text: string;
}

/** A review session's held changes: the files, the diff, Apply / Discard / Undo. */
export function Changes({ host, sessionId, version }: { host: string; sessionId: string; version: unknown }) {
  const [held, setHeld] = useState<Held | undefined>();
  const [said, setSaid] = useState('');
  const [busy, setBusy] = useState(false);
  const load = () => read('read', { action: 'changes', sessionId, host }).then(setHeld, (e) => setSaid(String(e.message)));
  useEffect(() => void load(), [sessionId, version]);
  const run = async (action: string) => {
    setBusy(true);
    try {
      const r = await act(host, action, sessionId);
      setSaid(String(r.text ?? `${action}: done`));
      await load();
    } catch (e) {
      setSaid((e as Error).message);
    } finally {
      setBusy(false);
    }
  };
  if (!held) return <section aria-label="changes"><p class="muted">{said || 'Loading the changes…'}</p></section>;
  return (
    <section class="changes" aria-labelledby="changes-h">
      <h3 id="changes-h">Changes ({held.state})</h3>
      <ul class="files">
        {held.files.map((f) => <li><span class={`k-${f.kind}`}>{f.kind}</span> <code>{f.path}</code></li>)}
      </ul>
      <div class="actions">
        <button type="button" disabled={busy || held.state !== 'pending'} onClick={() => run('apply')}>Apply</button>
        <button type="button" disabled={busy || held.state !== 'pending'} onClick={() => run('discard')}>Discard</button>
        <button type="button" disabled={busy || held.state !== 'applied'} onClick={() => run('undo')}>Undo</button>
      </div>
      {said && <p role="status" class="said">{said}</p>}
      {held.diff ? <Diff text={held.diff} /> : <p class="muted">{held.files.length ? 'No text diff (binary or large files are named above).' : 'Nothing changed.'}</p>}
    </section>
  );
}
