/**
 * The floor `process list` is measured against, in a process of its own: `node bare-rpc.js
 * SOCKET FILE` listens on a Unix socket and answers every NDJSON request line, parsed as the
 * daemon parses it, with the JSON-RPC result held in FILE (a response the daemon gave), its id
 * put in. Nothing else: the same bytes on the same transport, with none of the daemon's work.
 * Prints `ready` once it listens.
 */
import { readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';

const [socketPath, resultFile] = process.argv.slice(2);
const result = readFileSync(resultFile, 'utf8').trim();

const server = createServer((conn) => {
  let held = '';
  conn.setEncoding('utf8');
  conn.on('data', (chunk: string) => {
    held += chunk;
    for (let nl = held.indexOf('\n'); nl !== -1; nl = held.indexOf('\n')) {
      const line = held.slice(0, nl);
      held = held.slice(nl + 1);
      const req = JSON.parse(line) as { id: number | string };
      conn.write(`{"jsonrpc":"2.0","id":${JSON.stringify(req.id)},"result":${result}}\n`);
    }
  });
  conn.on('error', () => conn.destroy());
});
rmSync(socketPath, { force: true });
server.listen(socketPath, () => process.stdout.write('ready\n'));
process.once('SIGTERM', () => server.close(() => process.exit(0)));
