import type { Command } from 'commander';
import { act, approverOf, globalsOf, runAction } from '../context.js';

export function registerApprovals(program: Command): void {
  program
    .command('approvals')
    .summary('list the approvals waiting for you to answer, in every scope your credential reaches')
    .description(
      'List the commands waiting for a person to approve them (status approval_required), and the ended commands ' +
        'whose changes an approval rule held for review (with their summary), oldest first, with the ' +
        'procctl resume command that answers each. The approver credential (the one the daemon made beside its ' +
        'socket, or $PROCCTL_APPROVER_TOKEN) reaches every scope; without it only a scope that answers its own ' +
        '(scopes.NAME.selfApprove) is listed.',
    )
    .action(
      act((_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        return runAction(g, approverOf(g), 'approvals.list');
      }),
    );
}
