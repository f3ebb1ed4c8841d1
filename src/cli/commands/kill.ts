import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, UsageError, withClient } from '../context.js';
import { wholeNumber } from '../options.js';
import { statusCell } from '../render.js';

interface KillOptions {
  signal?: string;
  grace?: number;
  all?: boolean;
  reason?: string;
}

export function registerKill(program: Command): void {
  program
    .command('kill')
    .summary("stop a session's whole process group (or --all)")
    .description(
      'Stop session ID: send SIGNAL (default SIGTERM) to its whole process group, then SIGKILL whatever is left ' +
        'after the grace. Returns once it has ended. --all (without ID) stops every running session of the scope.',
    )
    .argument('[id]', 'session id')
    .option('--signal <name>', 'the stop signal, e.g. SIGINT, TERM, HUP (default SIGTERM)')
    .option('--grace <ms>', 'ms between the stop signal and SIGKILL', wholeNumber())
    .option('--all', 'stop every running session of the scope')
    .option('--reason <text>', 'a note kept in the final record')
    .action(
      act(async (id: string | undefined, o: KillOptions, cmd: Command) => {
        const g = globalsOf(cmd);
        if (o.all && id !== undefined) throw new UsageError('kill takes a session id or --all, not both');
        if (!o.all && id === undefined) throw new UsageError('kill needs a session id (or --all)');
        const params: Record<string, unknown> = { action: 'kill', ...(o.all ? { all: true } : { sessionId: id }) };
        if (o.signal !== undefined) params.signal = o.signal;
        if (o.grace !== undefined) params.graceMs = o.grace;
        if (o.reason !== undefined) params.reason = o.reason;
        const r = await withClient(g, (c) => c.call('process', scoped(g, params)));
        if (g.json) printJson(r);
        else if (o.all) {
          const sessions = (r.sessions ?? []) as Record<string, unknown>[];
          out([String(r.text ?? ''), ...sessions.map((s) => `${String(s.sessionId)}  ${statusCell(s)}  ${String(s.name)}`)].join('\n'));
        } else out(`${String(r.sessionId)}: ${String(r.text ?? '')}`);
        return EXIT.ok;
      }),
    );
}
