import type { Command } from 'commander';
import { act, approverOf, globalsOf, runAction } from '../context.js';

/** A number option's value, or a usage error naming the option. */
const whole = (name: string) => (v: string) => {
  const n = Number(v);
  if (!Number.isInteger(n) || n < 0) throw new Error(`${name} takes a whole number, 0 or more`);
  return n;
};

/** `procctl changes ID [--stat] [PATH...]` (SPEC §16): what a review session changed, held until applied. */
export function registerChanges(program: Command): void {
  program
    .command('changes')
    .summary("show what a review session changed in its workspaces (held until you apply it)")
    .description(
      'List each path session ID (run with exec --review) changed: added, modified, deleted, type, mode or symlink, ' +
        'with sizes, then a unified diff of its text files (binary and huge files named with their sizes). ' +
        'PATH... limits it to those paths; --stat shows the list alone. The diff is paged like log.',
    )
    .argument('<id>', 'session id')
    .argument('[paths...]', 'only these paths (relative to their workspace)')
    .option('--stat', 'the list of paths and totals, without the diff')
    .option('--offset <n>', 'first diff line to show (0-based)', whole('--offset'))
    .option('--limit <n>', 'number of diff lines to show', whole('--limit'))
    .action(
      act((id: string, paths: string[], o: { stat?: boolean; offset?: number; limit?: number }, cmd: Command) =>
        runAction(globalsOf(cmd), {
          action: 'changes',
          sessionId: id,
          ...(paths.length > 0 ? { paths } : {}),
          ...(o.stat ? { stat: true } : {}),
          ...(o.offset !== undefined ? { offset: o.offset } : {}),
          ...(o.limit !== undefined ? { limit: o.limit } : {}),
        }),
      ),
    );
}

export function registerApply(program: Command): void {
  program
    .command('apply')
    .summary("write a review session's changes into the workspace")
    .description(
      'Write the changes session ID holds into the real workspace, each file replaced atomically. A path the workspace ' +
        'changed since the session first wrote it is a conflict and is left alone unless --force. `procctl undo ID` puts back what an apply replaced. ' +
        'Changes an approval rule held for a person (action "review") take the approver credential, which procctl sends as for resume.',
    )
    .argument('<id>', 'session id')
    .argument('[paths...]', 'only these paths')
    .option('--force', 'overwrite conflicting paths too')
    .action(
      act((id: string, paths: string[], o: { force?: boolean }, cmd: Command) => {
        const g = globalsOf(cmd);
        // A person at the command line applies changes an approval rule held for them (SPEC §16): the credential goes along.
        return runAction(g, { action: 'apply', sessionId: id, ...(paths.length > 0 ? { paths } : {}), ...(o.force ? { force: true } : {}), ...approverOf(g) });
      }),
    );
}

export function registerDiscard(program: Command): void {
  program
    .command('discard')
    .summary("drop a review session's changes; the workspace stays as it is")
    .description('Drop the changes session ID holds: nothing of them reaches the workspace.')
    .argument('<id>', 'session id')
    .action(act((id: string, _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { action: 'discard', sessionId: id })));
}

export function registerUndo(program: Command): void {
  program
    .command('undo')
    .summary('put back what an apply replaced')
    .description(
      'Restore the files an apply of session ID replaced or removed, and remove those it added, where the workspace still ' +
        'holds what the apply wrote; a path changed since is a conflict and is listed, not touched.',
    )
    .argument('<id>', 'session id')
    .action(act((id: string, _o: unknown, cmd: Command) => runAction(globalsOf(cmd), { action: 'undo', sessionId: id })));
}
