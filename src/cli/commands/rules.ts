import type { Command } from 'commander';
import { act, approverOf, globalsOf, runAction, UsageError } from '../context.js';

export function registerRules(program: Command): void {
  const rules = program
    .command('rules')
    .summary('list remembered answers (numbered) and the config\'s approval rules')
    .description(
      'List the answers a person chose to remember (procctl resume ID --yes --remember command|prefix), numbered, ' +
        'then the approval rules of the config. With the approver credential, every scope\'s remembered answers.',
    )
    .action(
      act((_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        return runAction(g, approverOf(g), 'rules.list');
      }),
    );
  rules
    .command('rm')
    .summary('forget remembered answer N')
    .argument('<n>', 'the number procctl rules shows')
    .action(
      act((n: string, _o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        if (!/^[1-9][0-9]*$/.test(n)) throw new UsageError(`rules rm takes the number procctl rules shows, not "${n}"`);
        return runAction(g, { n: Number(n), ...approverOf(g) }, 'rules.remove');
      }),
    );
}
