import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import { createServer as createTcpServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, waitFor } from '../../helpers/daemon.js';

/**
 * The TLS the proxy ends for a credential's host is served on a thread of its own (SPEC §21,
 * netproxy/tls-thread.ts), not on the daemon's: the built proxy (the thread's code is a file of
 * the build) in this process, a real TCP stream from a client that CONNECTs and talks TLS
 * through it, and an HTTPS upstream whose CA is given as upstreamCa.
 */

const dist = (p: string) => join(ROOT, 'dist', 'src', p);
const BUILT = existsSync(dist('netproxy/tls-worker.js'));
if (!BUILT) console.warn('skipping the proxy TLS thread test: run `npm run build` first');

const VALUE = 'Bearer thread-test-7c1d9e2f0a';
const OTHER = 'Bearer other-test-5b8e4f';
const dir = mkdtempSync(join(tmpdir(), 'procctl-tls-thread-'));
const seen: { url: string; auth?: string }[] = [];
const denied: [string, string][] = [];
const used: [string, string][] = [];
let upstream: HttpsServer;
let release: () => void = () => {};
const held = new Promise<void>((r) => (release = r));
let front: Server;
let caPem: string;
let frontPort: number;
let upPort: number;

beforeAll(async () => {
  if (!BUILT) return;
  const { ProxyCa } = (await import(dist('netproxy/ca.js'))) as typeof import('../../../src/netproxy/ca.js');
  const { NetProxy } = (await import(dist('netproxy/proxy.js'))) as typeof import('../../../src/netproxy/proxy.js');
  // The upstream's certificate comes from a CA of its own, which the proxy is told to trust.
  const upCa = ProxyCa.open(join(dir, 'up-ca'));
  upstream = createHttpsServer({ ...upCa.leafFor('127.0.0.1') }, (q, r) => {
    seen.push({ url: q.url ?? '', auth: q.headers.authorization });
    // `/held` is answered once the test says so: its connection is open until then.
    void (q.url === '/held' ? held : Promise.resolve()).then(() => r.end(`you sent ${q.headers.authorization} to ${q.url}\n`));
  });
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r));
  upPort = (upstream.address() as { port: number }).port;
  const ca = ProxyCa.open(join(dir, 'ca'));
  caPem = ca.certPem;
  const proxy = new NetProxy(() => ca);
  const client = {
    policy: { allow: ['127.0.0.1'], deny: [], credentials: [] },
    denied: (host: string, reason: string) => void denied.push([host, reason]),
    used: (name: string, host: string) => void used.push([name, host]),
    upstreamCa: upCa.certPem,
    credentials: [
      { name: 'API', hosts: ['127.0.0.1'], header: 'authorization', value: VALUE, placeholder: 'procctl-placeholder-API-aaaaaaaaaaaaaaaaaaaaaaaa' },
      { name: 'ELSE', hosts: ['other.invalid'], header: 'authorization', value: OTHER, placeholder: 'procctl-placeholder-ELSE-bbbbbbbbbbbbbbbbbbbbbbbb' },
    ],
  };
  front = createTcpServer((socket) => proxy.serve(socket, client));
  await new Promise<void>((r) => front.listen(0, '127.0.0.1', r));
  frontPort = (front.address() as { port: number }).port;
});

afterAll(() => {
  front?.close();
  upstream?.closeAllConnections();
  upstream?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** A TLS stream to the upstream through the proxy's CONNECT, trusting the proxy's CA. */
async function through(): Promise<TLSSocket> {
  const raw = await new Promise<Socket>((resolve, reject) => {
    const q = httpRequest({ host: '127.0.0.1', port: frontPort, method: 'CONNECT', path: `127.0.0.1:${upPort}` });
    q.once('connect', (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error(`CONNECT: ${res.statusCode}`))));
    q.once('error', reject);
    q.end();
  });
  return new Promise((resolve, reject) => {
    const tls = tlsConnect({ socket: raw, ca: caPem, host: '127.0.0.1' }, () => resolve(tls));
    tls.once('error', reject);
  });
}

/** One HTTP/1.1 request on the stream; the whole answer (headers and body) as text. */
function ask(tls: TLSSocket, path: string, headers: string[]): Promise<string> {
  return new Promise((resolve) => {
    let text = '';
    tls.on('data', (c: Buffer) => (text += c.toString()));
    tls.once('end', () => resolve(text));
    tls.once('close', () => resolve(text));
    tls.write(`GET ${path} HTTP/1.1\r\nhost: 127.0.0.1:${upPort}\r\nconnection: close\r\n${headers.map((h) => `${h}\r\n`).join('')}\r\n`);
  });
}

/** Remote ports of the TCP handles open on the daemon's own thread, and on each other thread. */
function tcpPeers(): { main: number[]; threads: number[] } {
  const report = process.report.getReport() as unknown as { libuv: Handle[]; workers: { libuv: Handle[] }[] };
  const peers = (handles: Handle[]) => handles.filter((h) => h.type === 'tcp' && h.remoteEndpoint).map((h) => h.remoteEndpoint!.port);
  return { main: peers(report.libuv), threads: report.workers.flatMap((w) => peers(w.libuv)) };
}
interface Handle {
  type: string;
  remoteEndpoint?: { port: number };
}

describe.skipIf(!BUILT)('the proxy TLS thread (SPEC §21)', () => {
  it('writes the credential in, masks the answer and reports the use, with the upstream connection held by its own thread', async () => {
    const tls = await through();
    const answer = ask(tls, '/held', ['authorization: procctl-placeholder-API-aaaaaaaaaaaaaaaaaaaaaaaa']);
    // While the upstream holds its answer, the connection to it is open on the thread that made it
    // (looked for then: once answered, whether the pool keeps it depends on which end closes first).
    await waitFor(() => tcpPeers().threads.includes(upPort), { what: 'a connection to the upstream on the TLS thread' });
    expect(tcpPeers().main).not.toContain(upPort);
    release();
    const text = await answer;
    expect(text).toContain('HTTP/1.1 200');
    expect(text).toContain(`you sent ${'*'.repeat(VALUE.length)} to /held`);
    expect(text).not.toContain(VALUE);
    expect(seen.at(-1)).toEqual({ url: '/held', auth: VALUE });
    await waitFor(() => used.some(([n, h]) => n === 'API' && h === '127.0.0.1'), { what: 'the use told back' });
  });

  it('refuses a request inside the intercepted TLS that carries another credential\'s placeholder, and says so', async () => {
    const before = seen.length;
    const tls = await through();
    const text = await ask(tls, '/stray', ['x-token: procctl-placeholder-ELSE-bbbbbbbbbbbbbbbbbbbbbbbb']);
    expect(text).toContain('HTTP/1.1 403');
    expect(text).toContain('credential_elsewhere');
    expect(seen.length).toBe(before);
    await waitFor(() => denied.some(([h, why]) => h === '127.0.0.1' && why.startsWith('credential_elsewhere')), { what: 'the refusal told back' });
  });
});
