import type { Command } from 'commander';
import type { DaemonClient } from '../../rpc/client.js';
import { act, connect, EXIT, globalsOf, note, out, printJson, scoped, UsageError, withClient, type GlobalOptions } from '../context.js';
import { isRestarting } from '../feed.js';

interface WriteOptions {
  eof?: boolean;
  newline?: boolean;
}

/** Characters per write call: well under the daemon's frame limit even when JSON escaping grows them. */
const CHUNK_CHARS = 64 * 1024;

/** How long a chunk refused as `restarting` is sent again, a quarter second apart (as withClient rides a restart). */
const RIDE_MS = 30_000;
const RETRY_MS = 250;

/**
 * Send stdin as it arrives, in chunks, so a pipe of any size can feed a session; then the newline
 * and the end of input asked for. A chunk refused as `restarting` (SPEC §19: it was not written)
 * is sent again on a new connection once the new image serves: stdin read already cannot be read
 * twice, so retrying the whole command (withClient) would lose it.
 */
async function writeStdin(g: GlobalOptions, id: string, tail: { data?: string; eof?: true }): Promise<{ bytes: number; last: Record<string, unknown> | undefined }> {
  let c: DaemonClient | undefined;
  let said = false;
  const send = async (params: Record<string, unknown>): Promise<Record<string, unknown>> => {
    for (const start = Date.now(); ; ) {
      c ??= await connect(g);
      try {
        return await c.call('process', scoped(g, { action: 'write', sessionId: id, ...params }));
      } catch (err) {
        if (!isRestarting(err) || Date.now() - start > RIDE_MS) throw err;
        c.close();
        c = undefined;
      }
      if (!said) note(`procctl: the daemon is restarting; the input waits for it, up to ${RIDE_MS / 1000} s`);
      said = true;
      await new Promise((r) => setTimeout(r, RETRY_MS));
    }
  };
  let bytes = 0;
  let last: Record<string, unknown> | undefined;
  try {
    process.stdin.setEncoding('utf8');
    for await (const chunk of process.stdin as AsyncIterable<string>) {
      for (let i = 0; i < chunk.length; i += CHUNK_CHARS) {
        last = await send({ data: chunk.slice(i, i + CHUNK_CHARS) });
        bytes += Number(last?.bytes ?? 0);
      }
    }
    if (tail.data !== undefined || tail.eof) {
      last = await send(tail);
      bytes += Number(last?.bytes ?? 0);
    }
    return { bytes, last };
  } finally {
    (c as DaemonClient | undefined)?.close();
  }
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
        const nl = o.newline ? '\n' : '';
        let r: Record<string, unknown>;
        if (data !== '-') {
          r = await withClient(g, (c) => c.call('process', scoped(g, { action: 'write', sessionId: id, ...(data !== undefined ? { data: data + nl } : {}), ...(o.eof ? { eof: true } : {}) })));
        } else {
          const sent = await writeStdin(g, id, { ...(nl ? { data: nl } : {}), ...(o.eof ? { eof: true as const } : {}) });
          r = { ...(sent.last ?? { sessionId: id, eof: false }), bytes: sent.bytes, text: `Wrote ${sent.bytes} bytes${o.eof ? ' and closed stdin' : ''} of session ${id}.` };
        }
        if (g.json) printJson(r);
        else out(String(r.text ?? ''));
        return EXIT.ok;
      }),
    );
}
