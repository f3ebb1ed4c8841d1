/**
 * The floor `process list` and `process poll` are measured against, in a process of its own:
 * `node bare-rpc.js SOCKET FILE [--by-session]` listens on a Unix socket and answers every
 * NDJSON request line, parsed as the daemon parses it, with the JSON-RPC result held in FILE (a
 * response the daemon gave), its id put in. With `--by-session` FILE holds one result per
 * session id, and a request gets the one of its `params.sessionId` (a poll of that session as
 * the daemon answered it). Nothing else: the same bytes on the same transport, with none of the
 * daemon's work. Prints `ready` once it listens.
 */
import { readFileSync } from 'node:fs';
import { serveLines } from './line-server.js';

const [socketPath, resultFile, mode] = process.argv.slice(2);
const held = readFileSync(resultFile, 'utf8').trim();
// Each session's result as the text written, made once: an answer is a lookup, as the single result is.
const bySession = mode === '--by-session' ? new Map(Object.entries(JSON.parse(held) as Record<string, unknown>).map(([id, r]) => [id, JSON.stringify(r)])) : undefined;

serveLines(socketPath, (req, conn) => {
  const sessionId = String(req.params?.sessionId ?? '');
  const result = bySession ? bySession.get(sessionId) : held;
  if (result === undefined) throw new Error(`bare-rpc: no result held for session ${sessionId}`);
  conn.write(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":${result}}\n`);
});
