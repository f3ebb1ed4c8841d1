import type { Command } from 'commander';
import { act, EXIT, globalsOf, out, printJson, scoped, UsageError, withClient } from '../context.js';

interface Entry {
  sessionId: string;
  scope: string;
  startedAt: string;
  command: string;
  status: string;
  client?: { kind?: string; name?: string } | null;
  peer?: { uid?: number | null; pid?: number | null; exe?: string | null } | null;
  decision?: { action: string; part: string; reason: string };
  answers?: { answer: string; by: string }[];
  end?: { exit: number | null; signal: string | null; reason: string | null };
}

const when = (iso: string) => iso.replace('T', ' ').replace(/\.\d+Z$/, 'Z');

/** Who asked: the client and the peer process the kernel named. */
export function askedBy(e: Pick<Entry, 'client' | 'peer'>): string {
  const client = e.client?.kind ? `${e.client.kind}${e.client.name ? ` ${e.client.name}` : ''}` : 'unknown client';
  const p = e.peer;
  return p ? `${client}, uid ${p.uid ?? '?'} pid ${p.pid ?? '?'}${p.exe ? ` ${p.exe}` : ''}` : client;
}

/** One session on one line: when, id, scope, how it ended, who asked and who allowed, the command. */
export function historyLine(e: Entry): string {
  const ended = e.end ? (e.end.exit !== null ? ` exit ${e.end.exit}` : e.end.signal ? ` ${e.end.signal}` : e.end.reason ? ` (${e.end.reason})` : '') : '';
  const allowed = e.answers?.length ? `; ${e.answers.map((a) => `${a.answer === 'approve' ? 'approved' : 'refused'} by ${a.by}`).join(', ')}` : e.decision ? `; ${e.decision.action}` : '';
  const command = e.command.length > 120 ? `${e.command.slice(0, 120)}…` : e.command;
  return `${when(e.startedAt)}  ${e.sessionId}  ${e.scope}  ${e.status}${ended}  [${askedBy(e)}${allowed}]  ${command}`;
}

/** One record of a session's story, in words. */
function storyLine(r: Record<string, unknown>): string {
  const t = when(String(r.time));
  switch (r.type) {
    case 'session':
      return `${t}  asked     ${String(r.command)}  (in ${String(r.workdir)}, scope ${String(r.scope)}, by ${askedBy(r as Pick<Entry, "client" | "peer">)}; sandbox ${String(r.sandbox)}, changes ${String(r.changes)}, host ${String(r.host)})`;
    case 'decision':
      return `${t}  decided   ${String(r.action)}: ${String(r.part)} (${r.rule === null ? '' : `rule ${String(r.rule)}: `}${String(r.reason)})`;
    case 'answer':
      return `${t}  answered  ${r.answer === 'approve' ? 'approved' : 'refused'} (${String(r.kind)}) by ${String(r.by)}`;
    case 'network_refused':
      return `${t}  refused   network to ${String(r.host)} (${String(r.reason)})`;
    case 'credential_used':
      return `${t}  used      credential ${String(r.name)} for ${String(r.host)}`;
    case 'network_denied':
      return `${t}  refused   network to ${String(r.host)}, ${String(r.count)} time(s) in all`;
    case 'changes':
      return `${t}  changes   ${String(r.action)}: ${String(r.files)} file(s)`;
    case 'end': {
      const res = r.resources as { cpuMs?: number; memoryPeakBytes?: number } | null;
      return `${t}  ended     ${String(r.status)}${r.exit !== null ? ` exit ${String(r.exit)}` : ''}${r.signal ? ` ${String(r.signal)}` : ''}${r.reason ? ` (${String(r.reason)})` : ''}, ${String(r.runtimeMs)} ms, ${String(r.outputBytes)} bytes of output${res ? `, ${res.cpuMs} ms CPU, ${res.memoryPeakBytes} bytes peak memory` : ''}`;
    }
    default:
      return `${t}  ${String(r.type)}`;
  }
}

export function registerHistory(program: Command): void {
  program
    .command('history')
    .summary('sessions from the audit trail, long after they were forgotten; history ID tells one whole')
    .description(
      'Sessions from the audit trail (SPEC §18), newest first: who asked, who allowed it, how it ended. A scope sees its own; the ' +
        'operator (--scope \'*\', with the adminToken or where there is none the approver credential) sees every scope\'s. ' +
        'With an ID, that session\'s whole story.',
    )
    .argument('[id]', 'one session: its records in order')
    .option('--since <when>', 'started since: 2h, 30m, 7d, or an ISO 8601 time')
    .option('--until <when>', 'started until: as --since')
    .option('--of-scope <scope>', "the operator's: only this scope's sessions (asks as the operator, scope '*', unless --scope names one)")
    .option('--status <status>', 'running, approval_required, completed, failed or denied')
    .option('--grep <text>', 'command, workdir, id or scope holds this text (any case)')
    .option('--offset <n>', 'skip this many (paging)', '0')
    .option('--limit <n>', 'at most this many', '50')
    .action(
      act(async (id: string | undefined, o: { since?: string; until?: string; ofScope?: string; status?: string; grep?: string; offset: string; limit: string }, cmd: Command) => {
        const g = globalsOf(cmd);
        const int = (v: string, name: string) => {
          if (!/^\d+$/.test(v)) throw new UsageError(`--${name} takes a whole number, not "${v}"`);
          return Number(v);
        };
        // --of-scope is the operator's: without --scope it asks as the operator.
        const params: Record<string, unknown> = scoped(o.ofScope !== undefined && g.scope === undefined ? { ...g, scope: '*' } : g, {
          ...(id !== undefined ? { sessionId: id } : {}),
          ...(o.since !== undefined ? { since: o.since } : {}),
          ...(o.until !== undefined ? { until: o.until } : {}),
          ...(o.ofScope !== undefined ? { ofScope: o.ofScope } : {}),
          ...(o.status !== undefined ? { status: o.status } : {}),
          ...(o.grep !== undefined ? { grep: o.grep } : {}),
          offset: int(o.offset, 'offset'),
          limit: int(o.limit, 'limit'),
        });
        const r = await withClient(g, (c) => c.call('history', params));
        if (g.json) {
          printJson(r);
          return EXIT.ok;
        }
        if (id !== undefined) {
          const records = (r.records ?? []) as Record<string, unknown>[];
          if (records.length === 0) {
            out(String(r.text));
            return EXIT.failed;
          }
          out([`Session ${id}:`, ...records.map(storyLine)].join('\n'));
          return EXIT.ok;
        }
        const sessions = (r.sessions ?? []) as Entry[];
        const more = r.total > r.offset + sessions.length ? [`… ${r.total - r.offset - sessions.length} more: --offset ${r.offset + sessions.length}`] : [];
        out([...sessions.map(historyLine), String(r.text), ...more].join('\n'));
        return EXIT.ok;
      }),
    );
}
