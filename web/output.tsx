import { Terminal } from '@xterm/xterm';
import { useEffect, useRef, useState } from 'preact/hooks';
import { act, followOutput, read, type OutputChunk } from './connection.js';

/** A page of the log: the lines [offset, offset + limit) and how many there are. */
interface LogPage {
  output: string;
  totalLines: number;
  totalChars: number;
  /** Which characters of `output` came on stderr, [start, end) (where the daemon knows). */
  stderr?: [number, number][];
}

/** A page of the log as chunks, what came on stderr marked: text, never markup. */
function chunksOf(page: LogPage, end = ''): OutputChunk[] {
  const out: OutputChunk[] = [];
  let at = 0;
  for (const [a, b] of page.stderr ?? []) {
    if (a > at) out.push({ stream: 'log', data: page.output.slice(at, a) });
    out.push({ stream: 'stderr', data: page.output.slice(a, b) });
    at = b;
  }
  out.push({ stream: 'log', data: page.output.slice(at) + end });
  return out;
}

/** Chunks as text, stderr marked. */
function Chunks({ chunks }: { chunks: OutputChunk[] }) {
  return <>{chunks.map((c) => <span class={c.stream === 'stderr' ? 'stderr' : undefined} title={c.stream === 'stderr' ? 'stderr' : undefined}>{c.data}</span>)}</>;
}

const PAGE = 200;

/**
 * Follow a session's output: its stream first (kept aside), then, once the console says the stream
 * is live (`following`), the last page of its log, then what the stream brought after that page
 * (by offset), so nothing shows twice or goes missing. A log read before the stream was live could
 * miss what the job printed between the two.
 */
function useFollow(host: string, sessionId: string, first: (page: LogPage) => void, chunk: (c: OutputChunk) => void): void {
  useEffect(() => {
    let seen: number | undefined;
    const early: OutputChunk[] = [];
    let stopped = false;
    const stop = followOutput(
      host,
      sessionId,
      (c) => {
        if (seen === undefined) early.push(c);
        else if (c.offset === undefined || c.offset >= seen) chunk(c);
      },
      () =>
        void read('read', { action: 'log', sessionId, limit: PAGE, host }).then(
          (page: LogPage) => {
            if (stopped) return;
            first(page);
            seen = page.totalChars;
            for (const c of early) if (c.offset === undefined || c.offset >= seen) chunk(c);
          },
          () => (seen = 0),
        ),
    );
    return () => {
      stopped = true;
      stop();
    };
  }, [host, sessionId]);
}

/** Earlier lines than those shown, a page at a time, as text above the live view. */
function Earlier({ host, sessionId, before }: { host: string; sessionId: string; before: number }) {
  const [pages, setPages] = useState<OutputChunk[][]>([]);
  const [from, setFrom] = useState(before);
  useEffect(() => setFrom(before), [before]);
  if (from <= 0) return null;
  const more = async () => {
    const offset = Math.max(0, from - PAGE);
    const page = await read('read', { action: 'log', sessionId, offset, limit: from - offset, host });
    setPages([chunksOf(page, pages.length ? '\n' : ''), ...pages]);
    setFrom(offset);
  };
  return (
    <div class="earlier">
      <button type="button" onClick={more}>Show earlier output ({from} more line{from === 1 ? '' : 's'})</button>
      {pages.length > 0 && <pre class="out earlier-out"><Chunks chunks={pages.flat()} /></pre>}
    </div>
  );
}

/** Output on pipes: text, stderr marked; a job's output is text, never markup. */
export function PipeOutput({ host, sessionId }: { host: string; sessionId: string }) {
  const [chunks, setChunks] = useState<OutputChunk[]>([]);
  const [before, setBefore] = useState(0);
  const pre = useRef<HTMLPreElement>(null);
  const [follow, setFollow] = useState(true);
  useFollow(
    host,
    sessionId,
    (page) => {
      const lines = page.output === '' ? 0 : page.output.split('\n').length;
      setBefore(Math.max(0, page.totalLines - lines));
      setChunks((c) => [...(page.output ? chunksOf(page, '\n') : []), ...c]);
    },
    (c) => setChunks((all) => [...all, c]),
  );
  useEffect(() => {
    if (follow && pre.current) pre.current.scrollTop = pre.current.scrollHeight;
  }, [chunks, follow]);
  return (
    <div class="output">
      <Earlier host={host} sessionId={sessionId} before={before} />
      <pre class="out live" ref={pre} aria-label="output" aria-live="off" tabIndex={0}>
        <Chunks chunks={chunks} />
      </pre>
      <label class="follow"><input type="checkbox" checked={follow} onChange={(e) => setFollow((e.target as HTMLInputElement).checked)} /> Follow</label>
    </div>
  );
}

/** A terminal (pty) session in a terminal emulator; what is typed in it goes to the session. */
export function TerminalOutput({ host, sessionId, ended }: { host: string; sessionId: string; ended: boolean }) {
  const box = useRef<HTMLDivElement>(null);
  const term = useRef<Terminal | undefined>(undefined);
  const [before, setBefore] = useState(0);
  useEffect(() => {
    const t = new Terminal({ cols: 120, rows: 30, scrollback: 5000, convertEol: false, fontSize: 13 });
    t.open(box.current!);
    term.current = t;
    return () => t.dispose();
  }, [sessionId]);
  useEffect(() => {
    const t = term.current;
    if (!t || ended) return;
    // Keys go in order, one write at a time; what is typed meanwhile goes with the next one.
    let pending = '';
    let sending = false;
    const send = async () => {
      sending = true;
      while (pending) {
        const data = pending;
        pending = '';
        await act(host, 'write', sessionId, { data }).catch(() => undefined);
      }
      sending = false;
    };
    const sub = t.onData((data) => {
      pending += data;
      if (!sending) void send();
    });
    return () => sub.dispose();
  }, [sessionId, ended]);
  useFollow(
    host,
    sessionId,
    (page) => {
      const lines = page.output === '' ? 0 : page.output.split('\n').length;
      setBefore(Math.max(0, page.totalLines - lines));
      if (page.output) term.current?.write(page.output.replace(/\r?\n/g, '\r\n'));
    },
    (c) => term.current?.write(c.data),
  );
  return (
    <div class="output">
      <Earlier host={host} sessionId={sessionId} before={before} />
      <div class="term-box" ref={box} aria-label="terminal" />
    </div>
  );
}
