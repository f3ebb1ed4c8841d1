import type { Command } from 'commander';
import { commandLine } from '../argv.js';
import { act, globalsOf, runAction } from '../context.js';

export function registerPolicy(program: Command): void {
  const policy = program.command('policy').summary('explain how the approval rules judge a command, running nothing');
  policy
    .command('check')
    .summary('how the approval rules would judge CMD in the scope, part by part, running nothing')
    .description(
      'Print the decision (allow, ask or deny) the approval rules would give CMD in the scope (--scope), each simple ' +
        'command of it with the rule that decided, and run nothing. As with exec, one word after -- is a command line ' +
        'and several are an argument vector. Exits 0 whatever the decision.',
    )
    .argument('<cmd...>', 'the command (put it after --)')
    .action(
      act((words: string[], _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { command: commandLine(words) }, 'policy.check')),
    );
}
