import type { Command } from 'commander';
import { act, EXIT, globalsOf, note, out, printJson, scoped, UsageError, withClient } from '../context.js';
import { wholeNumber } from '../options.js';
import { bytes, duration, statusCell, table } from '../render.js';

/** How many sessions `ps` shows without --all or --limit. */
export const PS_DEFAULT_LIMIT = 50;

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
  /** Only in the operator's view (`--scope '*'`): the scope the session belongs to. */
  scope?: string;
  paused?: boolean;
  /** Where sessions have cgroups (SPEC §15). */
  resources?: { cpuMs: number; memoryBytes: number; memoryPeakBytes: number; processes: number };
  /** Review sessions (SPEC §16): where their changes stand. */
  changes?: { state: string; pending: boolean; files: number; bytes: number; error?: string };
  /** The TCP ports it listens on (SPEC §20): the last seen once it ended. */
  ports?: { address: string; port: number }[];
}

interface PsOptions {
  all?: boolean;
  limit?: number;
  offset?: number;
}

/** The `ps` table: newest first, one row per session. */
export function sessionTable(sessions: SessionRow[]): string {
  if (sessions.length === 0) return 'No sessions.';
  const newestFirst = [...sessions].sort((a, b) => Date.parse(b.startedAt ?? '') - Date.parse(a.startedAt ?? ''));
  // CPU and MEM where sessions have cgroups: memory now while it runs, the most it held once it ended.
  const usage = sessions.some((s) => s.resources !== undefined);
  const used = (s: SessionRow) => {
    const r = s.resources;
    if (!usage) return [];
    if (!r) return ['-', '-'];
    return [duration(r.cpuMs), bytes(s.status === 'running' || s.status === 'waiting_input' ? r.memoryBytes : r.memoryPeakBytes)];
  };
  // CHANGES where any session was run in review mode: what a person still has to decide.
  const reviewed = sessions.some((s) => s.changes !== undefined);
  const held = (s: SessionRow) => (reviewed ? [changesCell(s.changes)] : []);
  // PORTS where any session listens (or, ended, last did).
  const listening = sessions.some((s) => s.ports?.length);
  const ports = (s: SessionRow) => (listening ? [portsCell(s.ports)] : []);
  const rows = newestFirst.map((s) => [s.sessionId, statusCell(s), s.pid === null ? '-' : String(s.pid), duration(s.runtimeMs), ...used(s), ...held(s), ...ports(s), s.name]);
  const headers = ['ID', 'STATUS', 'PID', 'RUNTIME', ...(usage ? ['CPU', 'MEM'] : []), ...(reviewed ? ['CHANGES'] : []), ...(listening ? ['PORTS'] : []), 'NAME'];
  // The operator's view spans scopes: say whose each session is.
  if (sessions.some((s) => s.scope !== undefined)) {
    return table([headers[0], 'SCOPE', ...headers.slice(1)], rows.map((r, i) => [r[0], newestFirst[i].scope ?? '-', ...r.slice(1)]));
  }
  return table(headers, rows);
}

/**
 * The ports a session listens on, as short as they are clear: `8000` on every address (0.0.0.0,
 * ::), `127.0.0.1:8000`, `[::1]:8000` on one; each once, by port; `-` for none.
 */
export function portsCell(ports: SessionRow['ports']): string {
  if (!ports?.length) return '-';
  const any = (a: string) => a === '0.0.0.0' || a === '::';
  const words = ports.map((p) => (any(p.address) ? String(p.port) : p.address.includes(':') ? `[${p.address}]:${p.port}` : `${p.address}:${p.port}`));
  return [...new Set(words)].join(',');
}

/** A review session's changes in a word or two: `3 pending (1.2 kB)`, `applied`, `none`; `-` for a session run with direct writes. */
function changesCell(c: SessionRow['changes']): string {
  if (!c) return '-';
  if (c.error) return 'pending (unreadable)';
  if (c.pending) return `${c.files} pending (${bytes(c.bytes)})`;
  return c.state;
}

/** The line under the table when the scope has sessions it does not show, or ''. */
export function hiddenNote(shown: number, total: number, offset: number, limit = PS_DEFAULT_LIMIT): string {
  const hidden = total - shown;
  if (hidden <= 0) return '';
  const size = limit === PS_DEFAULT_LIMIT ? '' : ` --limit ${limit}`;
  const next = offset + shown < total ? `, \`procctl ps --offset ${offset + shown}${size}\` the next page` : '';
  return `${hidden} of ${total} sessions not shown; \`procctl ps --all\` shows every one${next}.`;
}

export function registerPs(program: Command): void {
  program
    .command('ps')
    .summary('list the sessions of the scope, newest first')
    .description(
      `List running and finished sessions of the scope, newest first: ID, STATUS, PID, RUNTIME, NAME, and where ` +
        `sessions have cgroups CPU (time used) and MEM (memory now, or the most it held once ended); where any ` +
        `session was run with changes "review", CHANGES (how many changed paths wait to be applied or discarded). ` +
        `Shows the newest ${PS_DEFAULT_LIMIT} unless --all or --limit says otherwise, and says how many it left out.`,
    )
    .option('--all', 'show every session of the scope')
    .option('--limit <n>', `show at most N sessions (default ${PS_DEFAULT_LIMIT})`, wholeNumber())
    .option('--offset <n>', 'skip the N newest sessions', wholeNumber())
    .action(
      act(async (o: PsOptions, cmd: Command) => {
        const g = globalsOf(cmd);
        if (o.all && o.limit !== undefined) throw new UsageError('ps takes --all or --limit, not both');
        const limit = o.all ? undefined : (o.limit ?? PS_DEFAULT_LIMIT);
        const params = { action: 'list', ...(limit === undefined ? {} : { limit }), ...(o.offset === undefined ? {} : { offset: o.offset }) };
        const r = await withClient(g, (c) => c.call('process', scoped(g, params)));
        if (g.json) {
          printJson(r);
          return EXIT.ok;
        }
        const sessions = r.sessions as SessionRow[];
        // A daemon from before paging answers every session and no total.
        const total = typeof r.total === 'number' ? r.total : sessions.length;
        const offset = o.offset ?? 0;
        if (sessions.length === 0 && total > 0) out(`No sessions at offset ${offset}; the scope has ${total}.`);
        else out(sessionTable(sessions));
        note(hiddenNote(sessions.length, total, offset, limit));
        return EXIT.ok;
      }),
    );
}
