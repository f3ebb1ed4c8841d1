import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, withClient } from '../context.js';

export function registerClear(program: Command): void {
  program
    .command('clear')
    .summary('forget a finished session')
    .description('Forget finished session ID: its record, output and scratch directory. A running session is refused; use rm.')
    .argument('<id>', 'session id')
    .action(
      act(async (id: string, _o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('process', scoped(g, { action: 'clear', sessionId: id })));
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return EXIT.ok;
      }),
    );
}
