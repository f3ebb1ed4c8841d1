/**
 * The floor `process list` and `process poll` are measured against, in a process of its own:
 * `node bare-rpc.js SOCKET FILE [--by-session]` listens on a Unix socket and answers every
 * NDJSON request line, parsed as the daemon parses it, with the JSON-RPC result held in FILE (a
 * response the daemon gave), its id put in. With `--by-session` FILE holds one result per
 * session id, and a request gets the one of its `params.sessionId` (a poll of that session as
 * the daemon answered it). Nothing else: the same bytes on the same transport, with none of the
 * daemon's work. Prints `ready` once it listens.
 */
import { readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';

const [socketPath, resultFile, mode] = process.argv.slice(2);
const held = readFileSync(resultFile, 'utf8').trim();
// Each session's result as the text written, made once: an answer is a lookup, as the single result is.
const bySession = mode === '--by-session' ? new Map(Object.entries(JSON.parse(held) as Record<string, unknown>).map(([id, r]) => [id, JSON.stringify(r)])) : undefined;

const server = createServer((conn) => {
  let pending = '';
  conn.setEncoding('utf8');
  conn.on('data', (chunk: string) => {
    pending += chunk;
    for (let nl = pending.indexOf('\n'); nl !== -1; nl = pending.indexOf('\n')) {
      const line = pending.slice(0, nl);
      pending = pending.slice(nl + 1);
      const req = JSON.parse(line) as { id: number | string; params?: { sessionId?: string } };
      const result = bySession ? bySession.get(req.params?.sessionId ?? '') : held;
      if (result === undefined) throw new Error(`bare-rpc: no result held for session ${req.params?.sessionId}`);
      conn.write(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":${result}}\n`);
    }
  });
  conn.on('error', () => conn.destroy());
});
rmSync(socketPath, { force: true });
server.listen(socketPath, () => process.stdout.write('ready\n'));
process.once('SIGTERM', () => server.close(() => process.exit(0)));
