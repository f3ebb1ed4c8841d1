import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, outcomeExit, printJson, scoped, withClient } from '../context.js';
import { wholeNumber } from '../options.js';

export function registerWait(program: Command): void {
  program
    .command('wait')
    .summary('sleep until any (--all: every one) of the sessions has ended or needs an answer')
    .description(
      'Wait until one of the sessions ID... has ended, or waits for input or an approval (--all: every one of ' +
        'them), at most --timeout MS (default 30000, at most 120000). Prints each session as it is then.\n' +
        'Exit status: 0 when the wait was met and none of the sessions done failed or exited non-zero, ' +
        '1 when one of them did, 4 when the timeout passed first.',
    )
    .argument('<ids...>', 'session ids')
    .option('--all', 'wait for every one of them, not the first')
    .option('--timeout <ms>', 'wait at most this many ms (default 30000, at most 120000)', wholeNumber())
    .action(
      act(async (ids: string[], o: { all?: boolean; timeout?: number }, cmd: Command) => {
        const g = globalsOf(cmd);
        // Sent again through a restart (the connection closes): with the time left of the wait asked for.
        const deadline = Date.now() + (o.timeout ?? DEFAULT_WAIT_MS);
        const params = () => {
          const left = Math.max(0, deadline - Date.now());
          return { action: 'wait', sessionIds: ids, ...(o.all ? { mode: 'all' } : {}), ...(o.timeout !== undefined || left < DEFAULT_WAIT_MS ? { timeout: left } : {}) };
        };
        const r = await withClient(g, (c) => c.call('process', scoped(g, params())), { read: true });
        const done = new Set<string>((r.done as string[] | undefined) ?? []);
        const sessions = (r.sessions as { sessionId: string; status?: unknown; exitCode?: unknown }[] | undefined) ?? [];
        const met = o.all ? done.size === sessions.length : done.size > 0;
        const failed = sessions.some((s) => done.has(s.sessionId) && outcomeExit(s) !== EXIT.ok);
        const code = !met ? TIMED_OUT : failed ? EXIT.failed : EXIT.ok;
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return code;
      }),
    );
}

/** The daemon's own default wait (SPEC §6). */
const DEFAULT_WAIT_MS = 30_000;

/** `procctl wait` ran out of time before the wait was met (as timeout(1) says 124; 4 is free among procctl's codes). */
const TIMED_OUT = 4;
