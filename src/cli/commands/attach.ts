import type { Command } from 'commander';
import { StringDecoder } from 'node:string_decoder';
import { RpcCallError } from '../../rpc/client.js';
import { act, EXIT, globalsOf, hasEnded, note, outcomeExit, scoped, UsageError, type GlobalOptions } from '../context.js';
import { EventFeed, OutputCursor, type SessionEvent } from '../feed.js';
import { forwardSignals } from '../remote.js';
import { endNotice } from '../render.js';

/** Ctrl-]: detach, as telnet does. */
const DETACH = 0x1d;

/** The size of this terminal (the daemon's default when it has none). */
function windowSize(): { cols: number; rows: number } {
  for (const s of [process.stdout, process.stderr]) if (s.isTTY && s.columns && s.rows) return { cols: s.columns, rows: s.rows };
  return { cols: 120, rows: 30 };
}

const isConflict = (err: unknown) => err instanceof RpcCallError && err.kind === 'conflict';

/** The session's record from the list, or undefined once it is forgotten. */
async function recordOf(feed: EventFeed, g: GlobalOptions, id: string): Promise<SessionEvent | undefined> {
  const { sessions } = await feed.call('process', scoped(g, { action: 'list' }));
  return (sessions as SessionEvent[]).find((s) => s.sessionId === id);
}

function alreadyEnded(id: string, rec: SessionEvent | undefined): number {
  note(`procctl: session ${id} has ended, so there is nothing to attach to; its output: \`procctl log ${id}\``);
  if (rec) note(endNotice(rec));
  return EXIT.failed;
}

/**
 * Connect this terminal to a running pty session: show its recent output, then send keystrokes
 * (raw mode) and show its output as it comes, until Ctrl-] detaches or the session ends. The
 * terminal is restored on every way out.
 */
async function attach(g: GlobalOptions, id: string): Promise<number> {
  const stdin = process.stdin;
  if (!stdin.isTTY) {
    throw new UsageError(`attach connects a terminal to session ${id}, and stdin is not a terminal; from a script, use write, send-keys or paste`);
  }
  const feed = await EventFeed.open(g, id);
  const signals = forwardSignals(feed, g);
  signals.target(id);
  const call = (params: Record<string, unknown>) => feed.call('process', scoped(g, { sessionId: id, ...params }));
  const undo: (() => void)[] = [];
  try {
    const rec = await recordOf(feed, g, id);
    if (!rec || hasEnded(rec.status)) return alreadyEnded(id, rec);
    const size = windowSize();
    try {
      await call({ action: 'resize', ...size });
    } catch (err) {
      if (!isConflict(err)) throw err;
      const now = await recordOf(feed, g, id);
      if (!now || hasEnded(now.status)) return alreadyEnded(id, now);
      throw new UsageError(`session ${id} does not run under a terminal; attach works with sessions started by \`procctl exec --pty\` (follow this one with \`procctl log ${id} -f\`)`);
    }

    const log = await call({ action: 'log', limit: size.rows });
    const recent = String(log.output ?? '');
    // The log gives lines; the tail says whether the last one was complete.
    const shown = recent && /\n$/.test(String(rec.tail ?? '')) ? `${recent}\n` : recent;
    process.stdout.write(shown);
    let lastChar = shown.slice(-1);
    const shownUpTo = Number(log.droppedChars ?? 0) + Number(log.totalChars ?? 0);
    const cursor = new OutputCursor(shownUpTo);

    stdin.setRawMode(true);
    undo.push(() => stdin.setRawMode(false));
    note(`${lastChar && lastChar !== '\n' ? '\n' : ''}[attached to ${id} (${String(rec.name)}); press Ctrl-] to detach, it keeps running]`);
    lastChar = '\n';

    return await new Promise<number>((resolve, reject) => {
      void feed.closed.then(reject);
      let done = false;
      const finish = (code: number, message: string) => {
        if (done) return;
        done = true;
        if (message) note(`${lastChar && lastChar !== '\n' ? '\n' : ''}${message}`);
        resolve(code);
      };

      // Keystrokes go out in order; a session that just ended is reported by its exited event.
      let writes = Promise.resolve();
      const send = (data: string) => {
        writes = writes.then(() => call({ action: 'write', data })).then(
          () => undefined,
          (err) => {
            if (!isConflict(err) && !done) note(`procctl: ${(err as Error).message}`);
          },
        );
      };
      const decoder = new StringDecoder('utf8');
      const onData = (chunk: Buffer) => {
        const at = chunk.indexOf(DETACH);
        const text = decoder.write(at >= 0 ? chunk.subarray(0, at) : chunk);
        if (text) send(text);
        // Let the keys typed before Ctrl-] arrive first.
        if (at >= 0) void writes.then(() => finish(EXIT.ok, `[detached from ${id}; it keeps running]`));
      };
      const onEnd = () => finish(EXIT.ok, ''); // the terminal went away: detach
      stdin.on('data', onData);
      stdin.once('end', onEnd);
      stdin.resume();
      undo.push(() => {
        stdin.off('data', onData);
        stdin.off('end', onEnd);
      });

      const onWinch = () => void call({ action: 'resize', ...windowSize() }).catch(() => undefined);
      process.on('SIGWINCH', onWinch);
      undo.push(() => process.off('SIGWINCH', onWinch));

      feed.follow(id, (e) => {
        if (e.type === 'output') {
          const text = cursor.fresh(e);
          if (!text) return;
          process.stdout.write(text);
          lastChar = text.slice(-1);
        } else if (e.type === 'exited') {
          finish(outcomeExit(e), endNotice({ ...e, sessionId: id }));
        }
      }, shownUpTo);
    });
  } finally {
    for (const f of undo.reverse()) f();
    signals.stop();
    feed.close();
    stdin.destroy();
  }
}

export function registerAttach(program: Command): void {
  program
    .command('attach')
    .summary("connect this terminal to a terminal (pty) session; Ctrl-] detaches")
    .description(
      'Connect your terminal to session ID, which must be running under a terminal (exec --pty): its recent ' +
        'output is shown, then what you type goes to it (Ctrl-C included, as a keystroke) and its output comes to ' +
        'your terminal, which is resized along with yours.\n' +
        'Press Ctrl-] to detach: the session keeps running (attach again, or use poll, log or kill). When the ' +
        'session ends, attach prints how it ended and exits: 1 if it failed or exited non-zero. SIGINT, SIGTERM, ' +
        "SIGHUP and SIGQUIT sent to procctl are delivered to the session's process group.",
    )
    .argument('<id>', 'session id')
    .action(act(async (id: string, _o: unknown, cmd: Command) => attach(globalsOf(cmd), id)));
}
