import type { Command } from 'commander';
import { approverCredential } from '../../rpc/credential.js';
import { act, EXIT, globalsOf, out, printJson, scoped, UsageError, withClient } from '../context.js';

export function registerRules(program: Command): void {
  const rules = program
    .command('rules')
    .summary('list remembered answers (numbered) and the config\'s approval rules')
    .description(
      'List the answers a person chose to remember (procctl resume ID --yes --remember command|prefix), numbered, ' +
        'then the approval rules of the config. With the approver credential, every scope\'s remembered answers.',
    )
    .action(
      act(async (_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const approverToken = approverCredential(g.socket);
        const r = await withClient(g, (c) => c.call('rules.list', scoped(g, approverToken ? { approverToken } : {})));
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return EXIT.ok;
      }),
    );
  rules
    .command('rm')
    .summary('forget remembered answer N')
    .argument('<n>', 'the number procctl rules shows')
    .action(
      act(async (n: string, _o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        if (!/^[1-9][0-9]*$/.test(n)) throw new UsageError(`rules rm takes the number procctl rules shows, not "${n}"`);
        const approverToken = approverCredential(g.socket);
        const r = await withClient(g, (c) => c.call('rules.remove', scoped(g, { n: Number(n), ...(approverToken ? { approverToken } : {}) })));
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return EXIT.ok;
      }),
    );
}
