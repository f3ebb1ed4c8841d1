import type { Command } from 'commander';
import type { DaemonClient } from '../../rpc/client.js';
import { act, EXIT, globalsOf, out, printJson, scoped, UsageError, withClient, type GlobalOptions } from '../context.js';

interface WriteOptions {
  eof?: boolean;
  newline?: boolean;
}

/** Characters per write call: well under the daemon's frame limit even when JSON escaping grows them. */
const CHUNK_CHARS = 64 * 1024;

/** Send stdin as it arrives, in chunks, so a pipe of any size can feed a session. */
async function writeStdin(c: DaemonClient, g: GlobalOptions, id: string): Promise<{ bytes: number; last: Record<string, unknown> | undefined }> {
  let bytes = 0;
  let last: Record<string, unknown> | undefined;
  process.stdin.setEncoding('utf8');
  for await (const chunk of process.stdin as AsyncIterable<string>) {
    for (let i = 0; i < chunk.length; i += CHUNK_CHARS) {
      last = await c.call('process', scoped(g, { action: 'write', sessionId: id, data: chunk.slice(i, i + CHUNK_CHARS) }));
      bytes += Number(last?.bytes ?? 0);
    }
  }
  return { bytes, last };
}

export function registerWrite(program: Command): void {
  program
    .command('write')
    .summary("write DATA to a session's stdin")
    .description(
      "Write DATA to the stdin of session ID, as given (no newline is added unless -n). DATA '-' sends this " +
        "command's own stdin until it ends. --eof closes the session's stdin afterwards (DATA may then be left out).",
    )
    .argument('<id>', 'session id')
    .argument('[data]', "the text to send, or '-' for stdin")
    .option('--eof', 'close stdin after the data')
    .option('-n, --newline', 'append a newline to DATA')
    .action(
      act(async (id: string, data: string | undefined, o: WriteOptions, cmd: Command) => {
        const g = globalsOf(cmd);
        if (data === undefined && !o.eof) throw new UsageError('write needs DATA, or --eof to close stdin');
        const r = await withClient(g, async (c) => {
          const send = (params: Record<string, unknown>) => c.call('process', scoped(g, { action: 'write', sessionId: id, ...params }));
          const nl = o.newline ? '\n' : '';
          if (data !== '-') return send({ ...(data !== undefined ? { data: data + nl } : {}), ...(o.eof ? { eof: true } : {}) });
          const sent = await writeStdin(c, g, id);
          const tail = nl || o.eof ? await send({ ...(nl ? { data: nl } : {}), ...(o.eof ? { eof: true } : {}) }) : undefined;
          const bytes = sent.bytes + Number(tail?.bytes ?? 0);
          const base = tail ?? sent.last ?? { sessionId: id, eof: false };
          return { ...base, bytes, text: `Wrote ${bytes} bytes${o.eof ? ' and closed stdin' : ''} of session ${id}.` };
        });
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return EXIT.ok;
      }),
    );
}
