import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, withClient } from '../context.js';

interface ToolDescription {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
}

export function registerTools(program: Command): void {
  program
    .command('tools')
    .summary('list the tools the daemon offers (--json: with their JSON Schemas)')
    .description('List the tools an agent can call through `procctl tool` (names and descriptions); --json prints them with their input JSON Schemas.')
    .action(
      act(async (_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('tools.list'));
        if (g.json) printJson(r);
        else {
          const tools = (Array.isArray(r) ? r : []) as ToolDescription[];
          const width = Math.max(0, ...tools.map((t) => t.name.length));
          out(tools.map((t) => `${t.name.padEnd(width)}  ${t.description}`).join('\n'));
        }
        return EXIT.ok;
      }),
    );
}
