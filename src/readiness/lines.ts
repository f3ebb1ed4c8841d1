import type { Session } from '../session/session.js';
import type { Stream } from '../session/output.js';

/** The longest line looked at; a longer one is cut here (matching reads at most this much of it). */
const MAX_LINE_CHARS = 8192;

/**
 * Call `fn` with each whole line the session prints, per stream (a line still being written is
 * held until its newline, or the end), until the returned function is called.
 */
export function watchLines(session: Session, fn: (line: string, stream: Stream) => void): () => void {
  const partial: Record<Stream, string> = { stdout: '', stderr: '' };
  const stopWatching = session.watchOutput((stream, text) => {
    let rest = partial[stream] + text;
    for (let nl = rest.indexOf('\n'); nl !== -1; nl = rest.indexOf('\n')) {
      fn(rest.slice(0, nl).replace(/\r$/, '').slice(0, MAX_LINE_CHARS), stream);
      rest = rest.slice(nl + 1);
    }
    partial[stream] = rest.length > MAX_LINE_CHARS ? rest.slice(0, MAX_LINE_CHARS) : rest;
  });
  let done = false;
  const stop = () => {
    if (done) return;
    done = true;
    stopWatching();
  };
  void session.finished.then(() => {
    // A last line without its newline is still a line.
    for (const stream of ['stdout', 'stderr'] as const) if (!done && partial[stream]) fn(partial[stream], stream);
    stop();
  });
  return stop;
}
