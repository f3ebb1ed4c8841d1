import type { Command } from 'commander';
import { act, globalsOf, runAction } from '../context.js';

export function registerClear(program: Command): void {
  program
    .command('clear')
    .summary('forget a finished session')
    .description('Forget finished session ID: its record, output and scratch directory. A running session is refused; use rm.')
    .argument('<id>', 'session id')
    .option('--discard', 'also drop the changes a review session still holds (refused otherwise)')
    .action(
      act((id: string, o: { discard?: boolean }, cmd: Command) => runAction(globalsOf(cmd), { action: 'clear', sessionId: id, ...(o.discard ? { discard: true } : {}) })),
    );
}
