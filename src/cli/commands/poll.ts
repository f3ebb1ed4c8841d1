import type { Command } from 'commander';
import { act, EXIT, globalsOf, hasEnded, note, outcomeExit, printJson, scoped, withClient } from '../context.js';
import { wholeNumber } from '../options.js';
import { aroundOutput } from '../render.js';

export function registerPoll(program: Command): void {
  program
    .command('poll')
    .summary('print the output no poll has returned yet')
    .description(
      'Drain the output of session ID that no poll has returned yet (stdout), then say whether it is still ' +
        'running or how it ended (stderr). --wait waits up to MS for new output or the end.\n' +
        'Exit status: 0 while running or after a clean exit, 1 if the session failed or exited non-zero.',
    )
    .argument('<id>', 'session id')
    .option('--wait <ms>', 'wait up to this many ms (at most 120000) for new output or the end', wholeNumber())
    .action(
      act(async (id: string, o: { wait?: number }, cmd: Command) => {
        const g = globalsOf(cmd);
        const params = { action: 'poll', sessionId: id, ...(o.wait !== undefined ? { timeout: o.wait } : {}) };
        const r = await withClient(g, (c) => c.call('process', scoped(g, params)));
        const code = hasEnded(r.status) ? outcomeExit(r) : EXIT.ok;
        if (g.json) {
          printJson(r);
          return code;
        }
        const output = String(r.output ?? '');
        const { before, after } = aroundOutput(String(r.text ?? ''), output);
        note(before);
        process.stdout.write(output);
        if (output && !output.endsWith('\n')) process.stdout.write('\n');
        note(after);
        return code;
      }),
    );
}
