import type { Command } from 'commander';
import { act, globalsOf, runAction } from '../context.js';

export function registerRm(program: Command): void {
  program
    .command('rm')
    .summary('kill a session if it is running, then forget it')
    .description('Remove session ID: stop it first if it is still running (SIGTERM, then SIGKILL after the grace), then forget it.')
    .argument('<id>', 'session id')
    .option('--discard', 'also drop the changes a review session still holds (refused otherwise)')
    .action(
      act((id: string, o: { discard?: boolean }, cmd: Command) => runAction(globalsOf(cmd), { action: 'remove', sessionId: id, ...(o.discard ? { discard: true } : {}) })),
    );
}
