import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, withClient } from '../context.js';

export function registerRm(program: Command): void {
  program
    .command('rm')
    .summary('kill a session if it is running, then forget it')
    .description('Remove session ID: stop it first if it is still running (SIGTERM, then SIGKILL after the grace), then forget it.')
    .argument('<id>', 'session id')
    .action(
      act(async (id: string, _o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('process', scoped(g, { action: 'remove', sessionId: id })));
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return EXIT.ok;
      }),
    );
}
