import type { Command } from 'commander';
import { act, globalsOf, runAction } from '../context.js';

export function registerClear(program: Command): void {
  program
    .command('clear')
    .summary('forget a finished session')
    .description('Forget finished session ID: its record, output and scratch directory. A running session is refused; use rm.')
    .argument('<id>', 'session id')
    .action(
      act((id: string, _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { action: 'clear', sessionId: id })),
    );
}
