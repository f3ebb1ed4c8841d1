import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, withClient } from '../context.js';

export function registerAudit(program: Command): void {
  const audit = program.command('audit').summary('check that the audit trail is whole (verify)').description('The audit trail (SPEC §18): what ran, who asked, who allowed it.');
  audit
    .command('verify')
    .summary('check that the audit trail is whole; exit 0 when it is, 1 when not')
    .description(
      'Follow the audit trail\'s hash chain from its first record to its last and say whether it is whole or, if not, the first record ' +
        'that was changed, is missing, out of order, or torn by a crash. The operator\'s: scope "*" (the default here) with the ' +
        'adminToken (--token, or $PROCCTL_ADMIN_TOKEN), or where the daemon has none the approver credential ' +
        '($PROCCTL_APPROVER_TOKEN, or the file beside the socket). Exit 0 when whole, 1 when not.',
    )
    .action(
      act(async (_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('audit.verify', scoped({ ...g, scope: g.scope ?? '*' }, {})));
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return r.ok ? EXIT.ok : EXIT.failed;
      }),
    );
}
