import type { Command } from 'commander';
import { act, globalsOf, runAction } from '../context.js';

/** `procctl pause ID` and `procctl continue ID` (SPEC §15): freeze a session's cgroup, and thaw it. */
export function registerPause(program: Command): void {
  program
    .command('pause')
    .summary('freeze every process of a session (continue lets it run on)')
    .description(
      'Freeze every process of session ID at once (its cgroup), wherever it went. While paused its timeout and ' +
        'waiting-for-input detection wait too; `procctl continue ID` lets it run on, and kill still stops it. ' +
        'Needs sessions with cgroups: `procctl status` says whether this host has them.',
    )
    .argument('<id>', 'session id')
    .action(act(async (id: string, _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { action: 'pause', sessionId: id })));
}

export function registerContinue(program: Command): void {
  program
    .command('continue')
    .summary('let a paused session run on')
    .description('Thaw session ID after `procctl pause ID`: every process of it runs on where it stopped.')
    .argument('<id>', 'session id')
    .action(act(async (id: string, _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { action: 'continue', sessionId: id })));
}
