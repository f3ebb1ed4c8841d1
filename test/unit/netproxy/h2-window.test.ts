import { mkdtempSync, rmSync } from 'node:fs';
import { createSecureServer, type Http2SecureServer, type ServerHttp2Session } from 'node:http2';
import { request as httpsRequest } from 'node:https';
import { createServer as createTcpServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { ProxyCa } from '../../../src/netproxy/ca.js';
import { Interceptor } from '../../../src/netproxy/intercept.js';

/**
 * The proxy's HTTP/2 session to a credential's origin opens its receive windows wide (issue 37
 * point 6): at HTTP/2's default of 64 KiB a stream and 64 KiB the connection, a download from an h2
 * origin stalls every 64 KiB until the proxy's WINDOW_UPDATE arrives, and costs the proxy's
 * thread a window update per few records. A real h2 origin with its own CA, the Interceptor fed a
 * real TCP stream, a client trusting the proxy's CA; the origin reads the windows the proxy gave.
 */

const dir = mkdtempSync(join(tmpdir(), 'procctl-h2-window-'));
const VALUE = 'Bearer window-test-41d0c9';
let origin: Http2SecureServer;
let front: Server;
let caPem: string;
let frontPort: number;
const sessions: ServerHttp2Session[] = [];

beforeAll(async () => {
  const upCa = ProxyCa.open(join(dir, 'up-ca'));
  origin = createSecureServer({ ...upCa.leafFor('127.0.0.1') }, (q, r) => {
    r.end(`auth ${q.headers.authorization === VALUE}\n`);
  });
  origin.on('session', (s: ServerHttp2Session) => sessions.push(s));
  await new Promise<void>((r) => origin.listen(0, '127.0.0.1', r));
  const originPort = (origin.address() as { port: number }).port;
  const ca = ProxyCa.open(join(dir, 'ca'));
  caPem = ca.certPem;
  const interceptor = new Interceptor();
  const client = {
    policy: { allow: ['127.0.0.1'], deny: [], credentials: [] },
    denied: () => undefined,
    upstreamCa: upCa.certPem,
    credentials: [{ name: 'API', hosts: ['127.0.0.1'], header: 'authorization', value: VALUE, placeholder: 'procctl-placeholder-API-cccccccccccccccccccccccc' }],
  };
  const leaf = ca.leafFor('127.0.0.1');
  front = createTcpServer((socket) => interceptor.serve(socket, Buffer.alloc(0), '127.0.0.1', originPort, client, leaf));
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  frontPort = (front.address() as { port: number }).port;
});

afterAll(() => {
  for (const s of sessions) s.destroy();
  front?.close();
  origin?.close();
  rmSync(dir, { recursive: true, force: true });
});

it('opens a stream window of 6 MiB and a connection window of 15 MiB toward an h2 origin', async () => {
  const body = await new Promise<string>((resolve, reject) => {
    const q = httpsRequest({ host: '127.0.0.1', port: frontPort, ca: caPem, path: '/', agent: false }, (r) => {
      let text = '';
      r.setEncoding('utf8').on('data', (t: string) => (text += t));
      r.once('end', () => resolve(text));
    });
    q.once('error', reject);
    q.end();
  });
  // The request went through the h2 session, the credential written in.
  expect(body).toBe('auth true\n');
  expect(sessions).toHaveLength(1);
  const s = sessions[0];
  expect(s.remoteSettings.initialWindowSize).toBe(6 * 1024 * 1024);
  // The connection's window as the origin sees it: the proxy's WINDOW_UPDATE raised it from 64 KiB.
  expect(s.state.remoteWindowSize).toBeGreaterThan(14 * 1024 * 1024);
});
