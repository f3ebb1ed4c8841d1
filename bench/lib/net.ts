import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that is free now (the kernel picks it; it is closed again at once). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}

/**
 * An HTTP(S) handler for the download benches: `/big` answers `bytes` of the letter a, written a
 * `chunk` at a time as fast as the connection takes them (the same buffer each time, waiting for
 * 'drain'); anything else a short answer. `onBig` sees each download's request first.
 */
export function bigAnswer(bytes: number, chunkBytes: number, onBig?: (q: IncomingMessage) => void): (q: IncomingMessage, r: ServerResponse) => void {
  const chunk = Buffer.alloc(chunkBytes, 97);
  return (q, r) => {
    if (q.url !== '/big') return void r.end('small answer\n');
    onBig?.(q);
    r.writeHead(200, { 'content-length': String(bytes) });
    let sent = 0;
    const more = () => {
      while (sent < bytes) {
        sent += chunk.length;
        if (!r.write(chunk)) return void r.once('drain', more);
      }
      r.end();
    };
    more();
  };
}
