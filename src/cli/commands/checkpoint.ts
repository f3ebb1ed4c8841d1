import type { Command } from 'commander';
import { act, EXIT, globalsOf, printJson, scoped, UsageError, withClient } from '../context.js';

/** The --data value as JSON; a usage error says where it is not. */
function parseData(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`--data must be JSON (${(err as Error).message}); quote it for the shell, e.g. --data '{"done": 3}'`);
  }
}

export function registerCheckpoint(program: Command): void {
  program
    .command('checkpoint')
    .summary('report progress from inside a running job')
    .description(
      'Record checkpoint NAME (with --data, any JSON value) on the session this command runs in: the last one ' +
        'shows in ps --json, poll and the final record. Meant to be run by a job that procctld started: the ' +
        'socket, the session and the scope come from $PROCCTL_SOCKET, $PROCCTL_SESSION_ID and $PROCCTL_SCOPE, ' +
        'and $PROCCTL_CHECKPOINT_KEY stands in for the scope\'s token, ' +
        "which the daemon sets in every session's environment. Prints nothing on success (its output would " +
        "become the job's output); --json prints the daemon's answer.",
    )
    .argument('<name>', 'what was reached, e.g. "migrated" or "epoch-3"')
    .option('--data <json>', 'a JSON value describing the progress')
    .action(
      act(async (name: string, o: { data?: string }, cmd: Command) => {
        const g = globalsOf(cmd);
        const data = o.data === undefined ? undefined : parseData(o.data);
        const sessionId = process.env.PROCCTL_SESSION_ID;
        if (!sessionId) {
          throw new UsageError('checkpoint reports progress of the session it runs in, and $PROCCTL_SESSION_ID is not set: run it from a command started by procctld (procctl exec)');
        }
        const params: Record<string, unknown> = { sessionId, name, ...(data === undefined ? {} : { data }) };
        // The job's own key works in a scope that needs a token, which a job is never given.
        const key = process.env.PROCCTL_CHECKPOINT_KEY;
        if (key) params.checkpointKey = key;
        const r = await withClient(g, (c) => c.call('checkpoint', scoped(g, params)));
        if (g.json) printJson(r);
        return EXIT.ok;
      }),
    );
}
