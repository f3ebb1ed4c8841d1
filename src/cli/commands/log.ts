import type { Command } from 'commander';
import { act, EXIT, globalsOf, hasEnded, note, outcomeExit, printJson, printJsonLine, scoped, UsageError, withClient, type GlobalOptions } from '../context.js';
import { wholeNumber } from '../options.js';
import { aroundOutput, endNotice } from '../render.js';
import { EventFeed } from '../feed.js';

interface LogOptions {
  offset?: number;
  limit?: number;
  follow?: boolean;
}

type Event = Record<string, unknown>;

function logParams(id: string, o: LogOptions): Record<string, unknown> {
  return { action: 'log', sessionId: id, ...(o.offset !== undefined ? { offset: o.offset } : {}), ...(o.limit !== undefined ? { limit: o.limit } : {}) };
}

/** The selected lines to stdout; the notes around them (caps, paging hint) to stderr. */
function printLog(r: Record<string, unknown>): void {
  const output = String(r.output ?? '');
  const { before, after } = aroundOutput(String(r.text ?? ''), output);
  note(before);
  if (output) process.stdout.write(`${output}\n`);
  note(after);
}

/**
 * Follow a session to its end: subscribe first so nothing is missed, print the log, then print
 * only the output past what the log held, and stop at the `exited` event. Through a planned
 * restart it reconnects and goes on from the last character it printed (EventFeed).
 */
async function follow(g: GlobalOptions, id: string, o: LogOptions): Promise<number> {
  const feed = await EventFeed.open(g, id, ['output', 'exited']);
  try {
    const log = await feed.call('process', scoped(g, logParams(id, o)));
    if (g.json) printJsonLine(log);
    else printLog(log);
    let lastChar = log.output ? '\n' : '';
    let exitStatus: number | undefined;
    let finish: ((status: number) => void) | undefined;
    feed.follow(
      id,
      (e) => {
        if (e.type === 'output') {
          const data = String(e.data ?? '');
          if (g.json) printJsonLine(e);
          else process.stdout.write(data);
          lastChar = data.slice(-1) || lastChar;
        } else if (e.type === 'exited') {
          if (g.json) printJsonLine(e);
          else {
            if (lastChar && lastChar !== '\n') process.stdout.write('\n');
            note(endNotice({ ...e, sessionId: id }));
          }
          exitStatus = outcomeExit(e);
          finish?.(exitStatus);
        } else if (e.type === 'dropped') {
          note(`procctl: ${String(e.text)}`);
        }
      },
      Number(log.droppedChars) + Number(log.totalChars),
    );
    if (exitStatus !== undefined) return exitStatus;
    if (hasEnded(log.status)) {
      // It ended before the subscription: no exited event will come, so its record says how it ended.
      const { sessions } = await feed.call('process', scoped(g, { action: 'list' }));
      // Its record says how; without one (gone since), the log's status says that it ended.
      const record = (sessions as Event[]).find((s) => s.sessionId === id) ?? { sessionId: id, status: log.status };
      if (!g.json) note(endNotice(record));
      return outcomeExit(record);
    }
    return await new Promise<number>((resolve, reject) => {
      finish = resolve;
      void feed.closed.then(reject);
    });
  } finally {
    feed.close();
  }
}

export function registerLog(program: Command): void {
  program
    .command('log')
    .summary("page a session's output by lines, or follow it (-f)")
    .description(
      'Print lines of the retained output of session ID (stdout); notes about caps and paging go to stderr. ' +
        'Without --offset/--limit: the last 200 lines. --limit N alone: the last N lines. --offset O alone: ' +
        'line O (0-based) to the end. Both: lines [O, O+N). Never drains what poll returns.\n' +
        '-f prints the selected lines, then new output as it arrives, until the session ends; its exit status ' +
        'is then 1 if the session failed or exited non-zero.',
    )
    .argument('<id>', 'session id')
    .option('--offset <n>', 'first line to print (0-based)', wholeNumber())
    .option('--limit <n>', 'number of lines', wholeNumber())
    .option('-f, --follow', 'keep printing new output until the session ends')
    .action(
      act(async (id: string, o: LogOptions, cmd: Command) => {
        const g = globalsOf(cmd);
        if (o.follow) {
          if (o.offset !== undefined && o.limit !== undefined) throw new UsageError('log -f takes --offset or --limit, not both: following continues from the end');
          return follow(g, id, o);
        }
        const r = await withClient(g, (c) => c.call('process', scoped(g, logParams(id, o))));
        if (g.json) printJson(r);
        else printLog(r);
        return EXIT.ok;
      }),
    );
}
