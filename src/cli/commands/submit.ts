import type { Command } from 'commander';
import { act, globalsOf, runAction } from '../context.js';

export function registerSubmit(program: Command): void {
  program
    .command('submit')
    .summary('press Enter in a session')
    .description('Send Enter to session ID: a carriage return on a terminal (pty) session, a newline on a pipe.')
    .argument('<id>', 'session id')
    .action(act(async (id: string, _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { action: 'submit', sessionId: id })));
}
