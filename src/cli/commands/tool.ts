import type { Command } from 'commander';
import { act, EXIT, globalsOf, hasEnded, out, outcomeExit, printJson, scoped, UsageError, withClient } from '../context.js';

async function readStdin(): Promise<string> {
  process.stdin.setEncoding('utf8');
  let text = '';
  for await (const chunk of process.stdin as AsyncIterable<string>) text += chunk;
  return text;
}

/** Exit status of a tool call: a session's end counts as for exec and poll; anything else is 0. */
function toolExit(call: Record<string, unknown>, r: Record<string, unknown>): number {
  const reportsEnd = call.tool === 'exec' || (call.tool === 'process' && call.action === 'poll');
  return reportsEnd && hasEnded(r.status) ? outcomeExit(r) : EXIT.ok;
}

export function registerTool(program: Command): void {
  program
    .command('tool')
    .summary('send a whole tool call object, e.g. {"tool":"exec","command":"ls"}')
    .description(
      'Send a tool call object as an agent harness would ({"tool":"exec",...} or {"tool":"process","action":...}) ' +
        "and print the result's text (the raw result with --json). JSON '-' reads it from stdin. " +
        '--scope and --token, when given, override the object\'s own.\n' +
        'Exit status: as exec for exec calls and process poll; otherwise 0 when the daemon answered.',
    )
    .argument('<json>', "the tool call as JSON, or '-' for stdin")
    .action(
      act(async (json: string, _o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const source = json === '-' ? await readStdin() : json;
        let call: unknown;
        try {
          call = JSON.parse(source);
        } catch (err) {
          throw new UsageError(`the tool call is not valid JSON: ${(err as Error).message}`);
        }
        if (typeof call !== 'object' || call === null || Array.isArray(call)) throw new UsageError('the tool call must be a JSON object such as {"tool":"exec","command":"ls"}');
        // The text a model would get, hints in the tools' own words.
        const params = scoped(g, call as Record<string, unknown>, 'rpc');
        const r = await withClient(g, (c) => c.call('tool', params));
        if (g.json) printJson(r);
        else out(String(r.text ?? JSON.stringify(r, null, 2)));
        return toolExit(params, r);
      }),
    );
}
