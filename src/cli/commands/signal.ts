import type { Command } from 'commander';
import { act, globalsOf, runAction } from '../context.js';

export function registerSignal(program: Command): void {
  program
    .command('signal')
    .summary("deliver one signal to a session's process group")
    .description(
      "Deliver SIGNAL (e.g. INT, SIGINT, HUP, USR1) once to the whole process group of session ID, as Ctrl-C in a " +
        'terminal does. Unlike kill there is no stop file, no grace and no SIGKILL: what happens next is up to the ' +
        'command.',
    )
    .argument('<id>', 'session id')
    .argument('<signal>', 'the signal name, with or without SIG')
    .action(
      act(async (id: string, signal: string, _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { action: 'signal', sessionId: id, signal })),
    );
}
