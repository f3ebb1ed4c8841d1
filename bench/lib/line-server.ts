import { rmSync } from 'node:fs';
import { createServer, type Socket } from 'node:net';

/**
 * A bare server's socket (bare-rpc.ts, bare-exec.ts): listens on `socketPath`, hands each NDJSON
 * request line, parsed, to `answer` with its connection, prints `ready` once it listens, and
 * closes on SIGTERM once its connections have.
 */
export function serveLines(socketPath: string, answer: (req: { id: number | string; params?: Record<string, unknown> }, conn: Socket) => void): void {
  const server = createServer((conn) => {
    let pending = '';
    conn.setEncoding('utf8');
    conn.on('data', (chunk: string) => {
      pending += chunk;
      for (let nl = pending.indexOf('\n'); nl !== -1; nl = pending.indexOf('\n')) {
        const line = pending.slice(0, nl);
        pending = pending.slice(nl + 1);
        answer(JSON.parse(line), conn);
      }
    });
    conn.on('error', () => conn.destroy());
  });
  rmSync(socketPath, { force: true });
  server.listen(socketPath, () => process.stdout.write('ready\n'));
  process.once('SIGTERM', () => server.close(() => process.exit(0)));
}
