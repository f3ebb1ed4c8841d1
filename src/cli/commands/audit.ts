import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, withClient } from '../context.js';

/** The operator's scope and token: `--scope`/`--token` when given, else "*" and $PROCCTL_ADMIN_TOKEN. */
export function operator(g: { scope?: string; token?: string }): Record<string, unknown> {
  const token = g.token ?? process.env.PROCCTL_ADMIN_TOKEN;
  return { scope: g.scope ?? '*', ...(token ? { token } : {}) };
}

export function registerAudit(program: Command): void {
  const audit = program.command('audit').summary('check that the audit trail is whole (verify)').description('The audit trail (SPEC §18): what ran, who asked, who allowed it.');
  audit
    .command('verify')
    .summary('check that the audit trail is whole; exit 0 when it is, 1 when not')
    .description(
      'Follow the audit trail\'s hash chain from its first record to its last and say whether it is whole or, if not, the first record ' +
        'that was changed, is missing, out of order, or torn by a crash. The operator\'s: scope "*" with the adminToken ' +
        '(--token, or $PROCCTL_ADMIN_TOKEN). Exit 0 when whole, 1 when not.',
    )
    .action(
      act(async (_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('audit.verify', { voice: 'cli', ...operator(g) }));
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return r.ok ? EXIT.ok : EXIT.failed;
      }),
    );
}
