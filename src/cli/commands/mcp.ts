import type { Command } from 'commander';
import { act, EXIT, globalsOf, note } from '../context.js';

export function registerMcp(program: Command): void {
  program
    .command('mcp')
    .summary('serve the exec and process tools over the Model Context Protocol (stdio)')
    .description(
      'An MCP server on stdin/stdout for agent harnesses: the tools exec and process, backed by the daemon, in the scope ' +
        'given by --scope (with --token). Starts a daemon (detached) when none is running, unless --no-spawn. ' +
        'Questions a command asks, and approvals, are put to the person when the client supports elicitation. See docs/mcp.md.',
    )
    .option('--no-spawn', 'fail when no daemon is running instead of starting one')
    .action(
      act(async (o: { spawn: boolean }, cmd: Command) => {
        const g = globalsOf(cmd);
        // Loaded only here: the MCP SDK is not needed by any other command.
        const { serveMcp } = await import('../../mcp/serve.js');
        await serveMcp({ host: g.host, socket: g.socket, scope: g.scope, token: g.token, spawn: o.spawn, say: note });
        return EXIT.ok;
      }),
    );
}
