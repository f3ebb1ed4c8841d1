/** The person at the terminal: questions a session asks (SPEC §7), read from this process's stdin. */

export interface Question {
  kind?: unknown;
  reason?: unknown;
  fields?: { options?: { value: string; label: string }[] }[];
}

/** What `process resume` takes as `input`. */
export type Answer = { confirm: boolean } | { text: string } | { eof: true };

/** The terminal stops mid-question: the session ended, or Ctrl-C in a no-echo read. */
export type Cancelled = undefined;

/** Read one line in the terminal's own (cooked) mode: it echoes and edits; null at end of input. */
function readLine(signal: AbortSignal): Promise<string | null> {
  const stdin = process.stdin;
  if (stdin.readableEnded) return Promise.resolve(null);
  return new Promise((resolve) => {
    let buf = '';
    const done = (line: string | null) => {
      stdin.off('data', onData);
      stdin.off('end', onEnd);
      signal.removeEventListener('abort', onAbort);
      stdin.pause();
      resolve(line);
    };
    const onData = (d: string) => {
      buf += d;
      const nl = buf.indexOf('\n');
      if (nl >= 0) done(buf.slice(0, nl).replace(/\r$/, ''));
    };
    const onEnd = () => done(null);
    const onAbort = () => done(null);
    stdin.setEncoding('utf8');
    stdin.on('data', onData);
    stdin.once('end', onEnd);
    signal.addEventListener('abort', onAbort, { once: true });
    stdin.resume();
  });
}

/**
 * Read one line without echo (raw mode): Enter ends it, Backspace and Ctrl-U edit, Ctrl-D on an
 * empty line is end of input, Ctrl-C calls `onCtrlC` and gives up.
 */
function readSecret(signal: AbortSignal, onCtrlC: () => void): Promise<string | null | Cancelled> {
  const stdin = process.stdin;
  if (stdin.readableEnded) return Promise.resolve(null);
  return new Promise((resolve) => {
    let chars: string[] = [];
    const done = (value: string | null | Cancelled) => {
      stdin.off('data', onData);
      signal.removeEventListener('abort', onAbort);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write('\n');
      resolve(value);
    };
    const onData = (d: string) => {
      for (const ch of d) {
        if (ch === '\r' || ch === '\n') return done(chars.join(''));
        if (ch === '\x03') {
          onCtrlC();
          return done(undefined);
        }
        if (ch === '\x04' && chars.length === 0) return done(null);
        if (ch === '\x7f' || ch === '\b') chars.pop();
        else if (ch === '\x15') chars = [];
        else if (ch >= ' ') chars.push(ch);
      }
    };
    const onAbort = () => done(undefined);
    stdin.setEncoding('utf8');
    stdin.setRawMode(true);
    stdin.on('data', onData);
    signal.addEventListener('abort', onAbort, { once: true });
    stdin.resume();
  });
}

const CONFIRM: Record<string, boolean> = { y: true, yes: true, n: false, no: false };

/**
 * Ask the question on stderr and read the answer from the terminal: y/yes or n/no for a
 * confirm (asked again otherwise), a line without echo for a secret, a line for text or a
 * choice. End of input (Ctrl-D) answers `eof`. Undefined when it was cancelled.
 */
export async function askAtTerminal(sessionId: string, q: Question, signal: AbortSignal, onCtrlC: () => void): Promise<Answer | Cancelled> {
  const kind = String(q.kind ?? 'text');
  const reason = String(q.reason ?? '').trim();
  const options = q.fields?.[0]?.options ?? [];
  const lines = [`procctl: session ${sessionId} is waiting for input${reason ? `: ${reason}` : ''}`];
  for (const o of options) lines.push(`  ${o.value}) ${o.label}`);
  process.stderr.write(`${lines.join('\n')}\n`);
  const hint = kind === 'confirm' ? 'y/n' : kind === 'secret' ? 'not echoed' : kind === 'select' ? 'a number' : 'a line';
  for (;;) {
    process.stderr.write(`answer (${hint}; Ctrl-D for end of input): `);
    const line = kind === 'secret' ? await readSecret(signal, onCtrlC) : await readLine(signal);
    if (signal.aborted || line === undefined) return undefined;
    if (line === null) return { eof: true };
    if (kind !== 'confirm') return { text: line };
    const yes = CONFIRM[line.trim().toLowerCase()];
    if (yes !== undefined) return { confirm: yes };
  }
}
