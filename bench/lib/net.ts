import { createServer } from 'node:net';

/** A TCP port on 127.0.0.1 that is free now (the kernel picks it; it is closed again at once). */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  await new Promise((r) => server.close(r));
  return port;
}
