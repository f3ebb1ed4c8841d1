import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, withClient } from '../context.js';
import { duration, statusCell, table } from '../render.js';

interface SessionRow {
  sessionId: string;
  status: string;
  name: string;
  pid: number | null;
  startedAt?: string;
  runtimeMs: number;
  exitCode?: number | null;
  signal?: string | null;
  reason?: string;
}

/** The `ps` table: newest first, one row per session. */
export function sessionTable(sessions: SessionRow[]): string {
  if (sessions.length === 0) return 'No sessions.';
  const newestFirst = [...sessions].sort((a, b) => Date.parse(b.startedAt ?? '') - Date.parse(a.startedAt ?? ''));
  const rows = newestFirst.map((s) => [s.sessionId, statusCell(s), s.pid === null ? '-' : String(s.pid), duration(s.runtimeMs), s.name]);
  return table(['ID', 'STATUS', 'PID', 'RUNTIME', 'NAME'], rows);
}

export function registerPs(program: Command): void {
  program
    .command('ps')
    .summary('list the sessions of the scope, newest first')
    .description('List running and finished sessions of the scope, newest first: ID, STATUS, PID, RUNTIME, NAME.')
    .action(
      act(async (_o: unknown, cmd: Command) => {
        const g = globalsOf(cmd);
        const r = await withClient(g, (c) => c.call('process', scoped(g, { action: 'list' })));
        if (g.json) printJson(r);
        else out(sessionTable(r.sessions as SessionRow[]));
        return EXIT.ok;
      }),
    );
}
