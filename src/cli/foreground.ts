import { RpcCallError } from '../rpc/client.js';
import { commandExit, EXIT, hasEnded, note, out, printJson, scoped, type GlobalOptions } from './context.js';
import { EventFeed, OutputCursor, type Caller, type SessionEvent } from './feed.js';
import { forwardSignals } from './remote.js';
import { endNotice } from './render.js';
import { askAtTerminal, type Question } from './terminal.js';
import { cliVoice, procctlCommand } from '../schema/voice.js';

export interface ForegroundOptions {
  /** Leave it running and return after this many ms; without it, wait for the end. */
  yieldMs?: number;
  /** Leave it running and return once it printed nothing for this many ms (yieldOnQuietMs, measured here from its output events). */
  quietMs?: number;
  stdinNull?: boolean;
}

type Result = Record<string, any>;

/** Characters per write call: well under the daemon's frame limit even when JSON escaping grows them. */
const CHUNK_CHARS = 64 * 1024;
/** Output kept for the --json result (the newest). */
const MAX_JSON_OUTPUT = 1_000_000;

/** The note after the output, worded as a finished exec result words it; '' for a clean exit. */
export function endFooter(e: SessionEvent): string {
  if (e.status === 'completed') return e.exitCode === 0 ? '' : `(Command exited with code ${e.exitCode})`;
  return `(${String(e.text ?? endNotice(e))})`;
}

/** Tell a person a session is still running and how to reach it, in the same words as the daemon's texts. */
export function stillRunning(r: Result, scope?: string): void {
  const v = cliVoice(scope);
  const id = String(r.sessionId);
  const prompt = r.interrupt ? ` and waiting for input (${r.interrupt.kind}): "${r.interrupt.reason}"` : '';
  out(`Session ${id} is still running (pid ${r.pid ?? '-'})${prompt}: ${r.name}`);
  const attach = r.pty && !r.warnings?.length ? ` or ${procctlCommand(scope, 'attach', id)}` : '';
  note(
    `Poll it with ${v.call({ action: 'poll', sessionId: id })}, follow it with ${procctlCommand(scope, 'log', id, '-f')}${attach}, ` +
      `feed it with ${v.call({ action: 'write', sessionId: id })}, stop it with ${v.call({ action: 'kill', sessionId: id })}.`,
  );
}

/** Did the command leave text on the line it waits on (a prompt)? As interrupt/prompt.ts's promptShown, for the CLI's own note. */
function promptLeft(tail: string): boolean {
  return (tail.split(/\r\n|\n|\r/).pop() ?? '').replace(/\x1b\[[0-?]*[ -/]*[@-~]/g, '').trim() !== '';
}

/** Send this process's stdin to the session as it arrives, then end-of-input; stops quietly once the session cannot take it. */
async function forwardStdin(client: Caller, g: GlobalOptions, id: string, stop: AbortSignal): Promise<void> {
  const write = (params: Record<string, unknown>) => client.call('process', scoped(g, { action: 'write', sessionId: id, ...params }));
  try {
    process.stdin.setEncoding('utf8');
    for await (const chunk of process.stdin as AsyncIterable<string>) {
      for (let i = 0; i < chunk.length && !stop.aborted; i += CHUNK_CHARS) await write({ data: chunk.slice(i, i + CHUNK_CHARS) });
      if (stop.aborted) return;
    }
    if (!stop.aborted) await write({ eof: true });
  } catch (err) {
    if (stop.aborted) return;
    // Ended, or its stdin closed: what it read is what it got. A lost connection is reported by the wait.
    if (err instanceof RpcCallError && err.kind !== 'conflict') note(`procctl: stopped forwarding stdin: ${err.message}`);
  }
}

/**
 * Run a command in the foreground through a backgrounded session, so its id is known at once:
 * subscribe first (events are held until the id is known), start it, stream its output to
 * stdout/stderr by stream, forward stdin (when not a terminal) and SIGINT/SIGTERM/SIGHUP/SIGQUIT,
 * answer its questions from the terminal, and end with its result. `notRunning` handles an exec
 * result that is not a running session (it could not start, or it was not started).
 */
export async function runForeground(g: GlobalOptions, params: Record<string, unknown>, o: ForegroundOptions, notRunning: (r: Result) => number): Promise<number> {
  const feed = await EventFeed.open(g);
  const signals = forwardSignals(feed, g);
  const stop = new AbortController();
  let timer: NodeJS.Timeout | undefined;
  let quiet: NodeJS.Timeout | undefined;
  let stdinUsed = false;
  try {
    const r: Result = await feed.call('exec', scoped(g, { ...params, background: true }));
    if (r.status !== 'running' && r.status !== 'waiting_input') return notRunning(r);
    for (const w of (r.warnings as string[] | undefined) ?? []) note(`procctl: warning: ${w}`);
    const id = String(r.sessionId);
    signals.target(id);
    const tty = Boolean(process.stdin.isTTY) && !o.stdinNull;

    return await new Promise<number>((resolve, reject) => {
      void feed.closed.then(reject);
      const cursor = new OutputCursor();
      const last = { stdout: '', stderr: '' };
      let output = '';
      let dropped = 0;
      const asked = new Set<unknown>();
      let done = false;
      const finish = (code: number) => {
        if (!done) resolve(code);
        done = true;
      };
      const endLines = () => {
        if (last.stdout && last.stdout !== '\n') process.stdout.write('\n');
        if (last.stderr && last.stderr !== '\n') process.stderr.write('\n');
        last.stdout = last.stderr = '';
      };

      const onExit = (e: SessionEvent) => {
        if (done) return;
        if (g.json) printJson(jsonResult(r, e, output, dropped));
        else {
          endLines();
          note(endFooter(e));
        }
        finish(commandExit(e));
      };

      const onQuestion = (i: (Question & { id?: unknown }) | undefined, tail?: unknown) => {
        if (!i || asked.has(i.id)) return;
        asked.add(i.id);
        if (!tty) {
          // On a pipe many programs ask without a prompt (bash's read -p): say how to see it.
          const unseen = !params.pty && typeof tail === 'string' && !promptLeft(tail) ? '; it printed no prompt line (on a pipe many programs show none): run it with --pty to see its question' : '';
          note(`procctl: session ${id} is waiting for input (${String(i.kind)}): "${String(i.reason ?? '')}"${unseen}; answer it with ${procctlCommand(g.scope, 'resume', id, '--text', 'TEXT')} (or --yes, --no, --eof)`);
          return;
        }
        stdinUsed = true;
        if (last.stdout && last.stdout !== '\n') process.stderr.write('\n');
        void askAtTerminal(id, i, stop.signal, () => signals.deliver('SIGINT'))
          .then((input) => input && feed.call('process', scoped(g, { action: 'resume', sessionId: id, input })))
          .catch((err) => {
            if (stop.signal.aborted || !(err instanceof RpcCallError)) return;
            note(err.kind === 'conflict' ? 'procctl: that question was already answered or has expired' : `procctl: ${err.message}`);
          });
      };

      const leave = (yielded: 'time' | 'quiet') => {
        if (done) return;
        if (g.json) printJson({ ...r, yielded, tail: output.slice(-2000) });
        else {
          endLines();
          if (yielded === 'quiet') note(`procctl: no output for ${o.quietMs} ms (--yield-on-quiet); leaving it running`);
          stillRunning({ ...r, pty: params.pty }, g.scope);
        }
        finish(EXIT.ok);
      };
      const quietAgain = () => {
        if (o.quietMs === undefined) return;
        clearTimeout(quiet);
        quiet = setTimeout(() => leave('quiet'), o.quietMs);
      };

      const onEvent = (e: SessionEvent) => {
        if (e.type === 'output') {
          const text = cursor.fresh(e);
          if (!text) return;
          quietAgain();
          if (g.json) {
            output += text;
            if (output.length > MAX_JSON_OUTPUT) {
              dropped += output.length - MAX_JSON_OUTPUT;
              output = output.slice(-MAX_JSON_OUTPUT);
            }
          } else {
            const stream = e.stream === 'stderr' ? 'stderr' : 'stdout';
            process[stream].write(text);
            last[stream] = text.slice(-1);
          }
        } else if (e.type === 'waiting_input') onQuestion(e.interrupt as Question, e.tail);
        else if (e.type === 'exited') onExit(e);
        else if (e.type === 'dropped') {
          note(`procctl: ${String(e.text ?? 'events were dropped')}; the session's whole output is in ${procctlCommand(g.scope, 'log', id)}`);
          // The end itself may have been dropped: ask how the session is doing.
          void feed
            .call('process', scoped(g, { action: 'list' }))
            .then(({ sessions }) => {
              const rec = (sessions as Result[]).find((s) => s.sessionId === id);
              if (rec && hasEnded(rec.status)) onExit(rec);
            })
            .catch(() => undefined);
        }
      };

      feed.follow(id, onEvent);
      if (r.interrupt) onQuestion(r.interrupt, r.tail ?? '');
      if (!o.stdinNull && !process.stdin.isTTY) {
        stdinUsed = true;
        void forwardStdin(feed, g, id, stop.signal);
      }
      if (o.yieldMs !== undefined) timer = setTimeout(() => leave('time'), o.yieldMs);
      quietAgain();
    });
  } finally {
    stop.abort();
    clearTimeout(timer);
    clearTimeout(quiet);
    signals.stop();
    if (stdinUsed) process.stdin.destroy();
    feed.close();
  }
}

/** The --json result of a foreground exec, shaped like a finished exec result. */
function jsonResult(r: Result, e: SessionEvent, output: string, dropped: number) {
  const footer = endFooter(e);
  const failed = e.status !== 'completed';
  return {
    status: e.status,
    sessionId: r.sessionId,
    name: r.name,
    exitCode: e.exitCode ?? null,
    ...(failed ? { signal: e.signal ?? null, reason: e.reason ?? null } : {}),
    durationMs: Date.now() - Date.parse(String(r.startedAt)),
    output,
    truncated: dropped > 0,
    droppedChars: dropped,
    ...(r.warnings ? { warnings: r.warnings } : {}),
    text: `${output ? output.replace(/\n$/, '') : '(no output)'}${footer ? `\n\n${footer}` : ''}`,
  };
}
