import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, withClient } from '../context.js';

/** `procctl shells`: the scope's persistent shells (SPEC §20). */
export function registerShells(program: Command): void {
  program
    .command('shells')
    .summary("list the scope's persistent shells")
    .description("List the scope's persistent shells (exec --shell NAME): name, idle or busy (and the command's session), directory, commands run, pid, last used.")
    .action(
      act(async (_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('shell.list', scoped(g, {})));
        if (g.json) {
          printJson(r);
          return EXIT.ok;
        }
        const rows = (r.shells as Record<string, any>[]).map((s) => [s.name, s.state === 'busy' ? `busy ${s.sessionId}` : 'idle', String(s.commands), String(s.pid ?? '-'), s.lastUsedAt, s.cwd]);
        if (rows.length === 0) {
          out('No shells.');
          return EXIT.ok;
        }
        const head = ['NAME', 'STATE', 'COMMANDS', 'PID', 'LAST USED', 'CWD'];
        const widths = head.map((h, i) => Math.max(h.length, ...rows.map((row) => row[i].length)));
        for (const row of [head, ...rows]) out(row.map((c, i) => (i === row.length - 1 ? c : c.padEnd(widths[i]))).join('  '));
        return EXIT.ok;
      }),
    );
}

/** `procctl shell close NAME`. */
export function registerShell(program: Command): void {
  const shell = program.command('shell').summary('close a persistent shell (shell close NAME)').description('Manage persistent shells: `shell close NAME` ends the shell (and a command running in it).');
  shell
    .command('close')
    .description('Close the persistent shell NAME; a command running in it ends with it.')
    .argument('<name>', 'the shell name')
    .action(
      act(async (name: string, _o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('shell.close', scoped(g, { name })));
        if (g.json) printJson(r);
        else out(r.text);
        return EXIT.ok;
      }),
    );
}
