import { createHash } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage } from 'node:http';
import { createSecureServer } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { testPki } from '../helpers/pki.js';
import { Scoped } from '../helpers/session.js';
import { NetFixture, NO_CURL, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * What goes through a credential's host besides one request and its answer (SPEC §21, issue 37):
 * a WebSocket upgrade (the credential written into the upgrade request, then frames both ways),
 * trailers both ways on HTTP/2 and on HTTP/1.1 chunked bodies (what gRPC needs), and the
 * placeholder of a credential in a request body to a host not its own. Node clients inside a
 * real sandbox, speaking through the daemon's proxy as $HTTPS_PROXY says.
 */

if (NO_CURL && !SKIP_SANDBOX) console.warn(`skipping the credential stream tests: ${NO_CURL}`);
const SKIP = SKIP_SANDBOX || NO_CURL !== undefined;

const VALUE = 'Bearer streams-value-6d2a9c41e7';
const MASKED = '*'.repeat(VALUE.length);
const net = new NetFixture('procctl-cred-streams-');
const { base } = net;
const ports: Record<string, number> = {};
const seen = {
  /** Each WebSocket upgrade the upstream took: the authorization it carried and the frames it got. */
  ws: [] as { auth?: string; frames: string[] }[],
  /** Each request the trailer upstreams finished reading. */
  h2: [] as { auth?: string; te?: string; body: string; trailers: Record<string, string> }[],
  h1: [] as { auth?: string; body: string; trailers: Record<string, string> }[],
  /** Every byte of request body any upstream got, finished or not. */
  bodies: [] as Buffer[],
  /** The plain HTTP host that is no credential's: each request it finished reading. */
  other: [] as { url: string; body: string }[],
};
let d: TestDaemon;
let s: Scoped;

/** A request's body as it comes, every byte kept in `seen.bodies` at once (a request that is cut off never ends). */
function bodyOf(q: IncomingMessage | NodeJS.ReadableStream): Promise<string> {
  const got: Buffer[] = [];
  const at = seen.bodies.push(Buffer.alloc(0)) - 1;
  return new Promise((resolve) => {
    q.on('data', (c: Buffer) => {
      got.push(c);
      seen.bodies[at] = Buffer.concat(got);
    });
    q.on('end', () => resolve(Buffer.concat(got).toString()));
  });
}

/** A WebSocket frame from the server: text, unmasked (RFC 6455 §5.2). */
function serverFrame(text: string): Buffer {
  const p = Buffer.from(text);
  return Buffer.concat([p.length < 126 ? Buffer.from([0x81, p.length]) : Buffer.from([0x81, 126, p.length >> 8, p.length & 0xff]), p]);
}

/** The client's masked text frames in `buf`, and what is left of it. */
function clientFrames(buf: Buffer): { texts: string[]; rest: Buffer } {
  const texts: string[] = [];
  let i = 0;
  while (i + 6 <= buf.length) {
    const len = buf[i + 1] & 0x7f;
    if (len >= 126 || i + 6 + len > buf.length) break;
    const mask = buf.subarray(i + 2, i + 6);
    const p = Buffer.from(buf.subarray(i + 6, i + 6 + len));
    for (let j = 0; j < p.length; j++) p[j] ^= mask[j % 4];
    texts.push(p.toString());
    i += 6 + len;
  }
  return { texts, rest: buf.subarray(i) };
}

/** Take a WebSocket upgrade (kept in `seen.ws`): 101, a first frame saying the authorization it got, then each frame echoed. */
function echoWs(q: IncomingMessage, socket: Socket): void {
  const auth = q.headers.authorization;
  const accept = createHash('sha1').update(`${String(q.headers['sec-websocket-key'])}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  const took = { auth, frames: [] as string[] };
  seen.ws.push(took);
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${accept}\r\n\r\n`);
  socket.write(serverFrame(`auth=${auth}`));
  let buf = Buffer.alloc(0);
  socket.on('data', (c: Buffer) => {
    const { texts, rest } = clientFrames(Buffer.concat([buf, c]));
    buf = rest;
    for (const t of texts) {
      took.frames.push(t);
      socket.write(serverFrame(`echo:${t}`));
    }
  });
  socket.on('error', () => socket.destroy());
}

beforeAll(async () => {
  if (SKIP) return;
  const pki = testPki('streams test CA');
  writeFileSync(join(base, 'upstream-ca.pem'), pki.caPem);
  // A wss:// server that wants the credential: it answers the upgrade, says what authorization it got, and echoes each frame.
  const wss = createHttpsServer({ key: pki.keyPem, cert: pki.certPem });
  wss.on('upgrade', (q: IncomingMessage, socket: Socket) => {
    if (q.headers.authorization !== VALUE) return void socket.end('HTTP/1.1 401 Unauthorized\r\ncontent-length: 13\r\nconnection: close\r\n\r\nunauthorized\n');
    echoWs(q, socket);
  });
  wss.on('request', (_q, r) => r.writeHead(426).end('upgrade required\n'));
  ports.wss = await net.listen(wss, '127.0.0.1');
  // HTTP/2 only, as a gRPC server: takes the request's trailers, ends its answer with grpc-status and grpc-message.
  ports.h2 = await net.listen(
    createSecureServer({ key: pki.keyPem, cert: pki.certPem, allowHTTP1: false }, (q, r) => {
      void bodyOf(q).then((body) => {
        // A stream the proxy cut (reset) ends here too: not a request the upstream took.
        if (q.aborted) return;
        seen.h2.push({ auth: q.headers.authorization, te: q.headers.te as string | undefined, body, trailers: Object.fromEntries(Object.entries(q.trailers)) as Record<string, string> });
        r.writeHead(200, { 'content-type': 'application/grpc' });
        r.write(`reply to ${body}`);
        r.addTrailers({ 'grpc-status': '0', 'grpc-message': `saw ${q.headers.authorization} and ${q.trailers['x-checksum']}` });
        r.end();
      });
    }),
    '127.0.0.1',
  );
  // HTTP/1.1 only, answering with a chunked body and trailers.
  ports.h1 = await net.listen(
    createHttpsServer({ key: pki.keyPem, cert: pki.certPem }, (q, r) => {
      void bodyOf(q).then((body) => {
        seen.h1.push({ auth: q.headers.authorization, body, trailers: { ...q.trailers } as Record<string, string> });
        r.writeHead(200, { 'content-type': 'text/plain', trailer: 'grpc-status, grpc-message' });
        r.write(`reply to ${body}`);
        r.addTrailers({ 'grpc-status': '0', 'grpc-message': `saw ${q.headers.authorization} and ${q.trailers['x-checksum']}` });
        r.end();
      });
    }),
    '127.0.0.1',
  );
  const other = createHttpServer((q, r) => {
      void bodyOf(q).then((body) => {
        seen.other.push({ url: q.url!, body });
        // Chunked, with a trailer the plain forward passes on as it came.
        r.write(`the other host got ${body.length} bytes\n`);
        r.addTrailers({ 'x-other': `${q.trailers['x-sum'] ?? 'none'}` });
        r.end();
      });
  });
  // ws:// on the plain host: what the forward proxy relays as it came.
  other.on('upgrade', (q: IncomingMessage, socket: Socket) => echoWs(q, socket));
  ports.other = await net.listen(other, '127.0.0.2');
  d = await startDaemon({
    config: {
      sandbox: {
        mode: 'workspace-write',
        workspaces: [base],
        network: {
          allow: ['127.0.0.2'],
          upstreamCa: join(base, 'upstream-ca.pem'),
          credentials: [
            { name: 'API', hosts: ['127.0.0.1'], value: VALUE },
            { name: 'ELSE', hosts: ['else.example'], value: 'Bearer else-value-2f8e1b' },
          ],
        },
      },
    },
  });
  s = new Scoped(await d.client(), 'credstreams');
  // What the job's scripts share: a tunnel through the proxy, and TLS over it trusting the bundle the job was given.
  writeFileSync(
    join(base, 'lib.mjs'),
    `import crypto from 'node:crypto'; import http from 'node:http'; import tls from 'node:tls';
     const proxy = new URL(process.env.HTTPS_PROXY);
     export function tunnel(target) {
       return new Promise((resolve, reject) => {
         const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: target });
         req.on('connect', (res, socket) => (res.statusCode === 200 ? resolve(socket) : reject(new Error('CONNECT ' + res.statusCode))));
         req.on('error', reject);
         req.end();
       });
     }
     export async function tlsTo(port, alpn) {
       const raw = await tunnel('127.0.0.1:' + port);
       return new Promise((resolve, reject) => {
         const t = tls.connect({ socket: raw, host: '127.0.0.1', ALPNProtocols: [alpn] }, () => resolve(t));
         t.on('error', reject);
       });
     }
     export const proxyAt = { host: proxy.hostname, port: Number(proxy.port) };
     export const frame = (text) => {
       const p = Buffer.from(text); const mask = crypto.randomBytes(4);
       const out = Buffer.concat([Buffer.from([0x81, 0x80 | p.length]), mask, p]);
       for (let i = 0; i < p.length; i++) out[6 + i] ^= mask[i % 4];
       return out;
     };
     const frames = (buf) => {
       const out = []; let i = 0;
       while (i + 2 <= buf.length) { const len = buf[i + 1] & 0x7f; if (i + 2 + len > buf.length) break; out.push(buf.subarray(i + 2, i + 2 + len).toString()); i += 2 + len; }
       return out;
     };
     /** A WebSocket handshake on t (GET target), two frames sent; what comes back printed as NAME status=..., NAME frames=[...] or NAME answer="...". */
     export async function ws(t, name, target, hostHeader, extra) {
       const key = crypto.randomBytes(16).toString('base64');
       t.write('GET ' + target + ' HTTP/1.1\\r\\nHost: ' + hostHeader + '\\r\\nUpgrade: websocket\\r\\nConnection: Upgrade\\r\\nSec-WebSocket-Key: ' + key + '\\r\\nSec-WebSocket-Version: 13\\r\\n' + extra + '\\r\\n');
       let buf = Buffer.alloc(0); let sent = false;
       await new Promise((resolve) => {
         const done = () => { t.destroy(); resolve(); };
         t.on('data', (c) => {
           buf = Buffer.concat([buf, c]);
           const end = buf.indexOf('\\r\\n\\r\\n');
           if (end < 0) return;
           const head = buf.subarray(0, end).toString();
           if (!head.startsWith('HTTP/1.1 101')) return;
           const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
           if (!sent) { sent = true; console.log(name + ' status=101 accept=' + head.includes(accept)); t.write(frame('hello')); t.write(frame('again')); }
           const got = frames(buf.subarray(end + 4));
           if (got.length >= 3) { console.log(name + ' frames=' + JSON.stringify(got)); done(); }
         });
         t.on('end', () => { if (!sent) console.log(name + ' answer=' + JSON.stringify(buf.toString())); done(); });
         t.on('error', (e) => { console.log(name + ' error ' + e.message); done(); });
       });
     }`,
  );
}, 120_000);

afterAll(() => net.close(d));

const run = (name: string, script: string) => {
  writeFileSync(join(base, name), script);
  return net.run(s, `${JSON.stringify(process.execPath)} ${JSON.stringify(join(base, name))}`);
};

/** The session's refusals, once there is one. */
const refusals = (sessionId: string) =>
  waitFor(async () => (await s.list()).find((x: any) => x.sessionId === sessionId && x.network?.denied?.length > 0)?.network.denied as { host: string; reason: string }[] | undefined, {
    what: 'the refusal counted on the session',
  });

describe.skipIf(SKIP)('WebSocket, trailers and bodies through the proxy that writes a credential in, inside a real sandbox', () => {
  it('a WebSocket upgrade to a credential host: the value written into the upgrade request, frames both ways, the value masked in what comes back; one carrying another credential placeholder is refused and never sent', async () => {
    const before = seen.ws.length;
    const r = await run(
      'ws.mjs',
      `import { tlsTo, ws } from './lib.mjs';
       await ws(await tlsTo(${ports.wss}, 'http/1.1'), 'one', '/chat', '127.0.0.1:${ports.wss}', '');
       await ws(await tlsTo(${ports.wss}, 'http/1.1'), 'two', '/chat', '127.0.0.1:${ports.wss}', 'X-Else: ' + process.env.PROCCTL_CRED_ELSE + '\\r\\n');`,
    );
    expect(r.output).toContain('one status=101 accept=true\n');
    expect(r.output).toContain(`one frames=${JSON.stringify([`auth=${MASKED}`, 'echo:hello', 'echo:again'])}\n`);
    expect(r.output).not.toContain(VALUE.slice(7));
    // The upstream took one upgrade, with the value written in, and got the job's frames.
    expect(seen.ws.slice(before)).toEqual([{ auth: VALUE, frames: ['hello', 'again'] }]);
    expect(r.output).toMatch(/two answer="HTTP\/1\.1 403 Forbidden\\r\\n[^\n]*credential_elsewhere: the request carries \$PROCCTL_CRED_ELSE/);
    const denied = await refusals(r.sessionId);
    expect(denied[0].reason).toMatch(/^credential_elsewhere: the request carries \$PROCCTL_CRED_ELSE/);
    const history = (await s.request('history', { sessionId: r.sessionId })).result;
    expect(history.records.filter((x: any) => x.type === 'credential_used')).toHaveLength(1);
  });

  it('a ws:// WebSocket to a host that is no credential: relayed as it came; ws:// to a credential host is refused (plain HTTP)', async () => {
    const before = seen.ws.length;
    const r = await run(
      'wsplain.mjs',
      `import net from 'node:net'; import { proxyAt, ws } from './lib.mjs';
       const to = () => new Promise((resolve) => { const t = net.connect(proxyAt.port, proxyAt.host, () => resolve(t)); });
       await ws(await to(), 'plain', 'http://127.0.0.2:${ports.other}/chat', '127.0.0.2:${ports.other}', '');
       await ws(await to(), 'cred', 'http://127.0.0.1:${ports.wss}/chat', '127.0.0.1:${ports.wss}', '');`,
    );
    expect(r.output).toContain('plain status=101 accept=true\n');
    expect(r.output).toContain(`plain frames=${JSON.stringify(['auth=undefined', 'echo:hello', 'echo:again'])}\n`);
    expect(seen.ws.slice(before)).toEqual([{ auth: undefined, frames: ['hello', 'again'] }]);
    expect(r.output).toMatch(/cred answer="HTTP\/1\.1 403 Forbidden\\r\\n[^\n]*credential_plain_http: the proxy writes credential API only into requests it sends over TLS it has verified; use wss:\/\/127\.0\.0\.1/);
  });

  it("HTTP/2 trailers both ways (gRPC's shape): the job's trailers reach the upstream, grpc-status and grpc-message come back, the value masked in them", async () => {
    const before = seen.h2.length;
    const r = await run(
      'h2.mjs',
      `import http2 from 'node:http2'; import { tlsTo } from './lib.mjs';
       const t = await tlsTo(${ports.h2}, 'h2');
       const session = http2.connect('https://127.0.0.1:${ports.h2}', { createConnection: () => t });
       const st = session.request({ ':method': 'POST', ':path': '/pkg.Service/Call', 'content-type': 'application/grpc', te: 'trailers' }, { waitForTrailers: true });
       st.on('wantTrailers', () => st.sendTrailers({ 'x-checksum': 'c0ffee' }));
       let body = '';
       st.on('response', (h) => console.log('status=' + h[':status'] + ' type=' + h['content-type']));
       st.on('trailers', (h) => console.log('grpc-status=' + h['grpc-status'] + ' grpc-message=' + h['grpc-message']));
       st.on('data', (c) => (body += c));
       st.on('end', () => { console.log('body=' + body); session.close(); });
       st.on('error', (e) => { console.log('error ' + e.message); session.close(); });
       st.end('ping');`,
    );
    expect(r.output).toContain('status=200 type=application/grpc\n');
    expect(r.output).toContain('body=reply to ping\n');
    expect(r.output).toContain(`grpc-status=0 grpc-message=saw ${MASKED} and c0ffee\n`);
    expect(seen.h2.slice(before)).toEqual([{ auth: VALUE, te: 'trailers', body: 'ping', trailers: { 'x-checksum': 'c0ffee' } }]);
  });

  it('HTTP/1.1 chunked trailers both ways through a credential host', async () => {
    const before = seen.h1.length;
    const r = await run(
      'h1.mjs',
      `import http from 'node:http'; import { tlsTo } from './lib.mjs';
       const t = await tlsTo(${ports.h1}, 'http/1.1');
       const req = http.request({ createConnection: () => t, host: '127.0.0.1', port: ${ports.h1}, method: 'POST', path: '/call', headers: { 'transfer-encoding': 'chunked', te: 'trailers', trailer: 'x-checksum' } }, (res) => {
         let body = '';
         res.on('data', (c) => (body += c));
         res.on('end', () => {
           console.log('status=' + res.statusCode + ' body=' + body);
           console.log('grpc-status=' + res.trailers['grpc-status'] + ' grpc-message=' + res.trailers['grpc-message']);
           t.destroy();
         });
       });
       req.on('error', (e) => console.log('error ' + e.message));
       req.write('ping');
       req.addTrailers({ 'x-checksum': 'c0ffee' });
       req.end();`,
    );
    expect(r.output).toContain('status=200 body=reply to ping\n');
    expect(r.output).toContain(`grpc-status=0 grpc-message=saw ${MASKED} and c0ffee\n`);
    expect(seen.h1.slice(before)).toEqual([{ auth: VALUE, body: 'ping', trailers: { 'x-checksum': 'c0ffee' } }]);
  });

  it('a placeholder in a plain HTTP body to another host: a small body is refused before anything is sent, a streamed one is cut off before the placeholder leaves; a body without one goes through', async () => {
    const before = seen.other.length;
    const bodies = seen.bodies.length;
    const r = await run(
      'body.mjs',
      `import http from 'node:http'; import { proxyAt } from './lib.mjs';
       const placeholder = process.env.PROCCTL_CRED_API;
       const post = (path, headers, write) => new Promise((resolve) => {
         const req = http.request({ ...proxyAt, method: 'POST', path: 'http://127.0.0.2:${ports.other}' + path, headers }, (res) => {
           let body = ''; res.on('data', (c) => (body += c));
           res.on('end', () => resolve(res.statusCode + ' ' + body.trim() + (res.trailers['x-other'] ? ' trailer=' + res.trailers['x-other'] : '')));
         });
         req.on('error', (e) => resolve('error ' + e.code));
         write(req);
       });
       const small = 'token=' + placeholder;
       console.log('small=' + await post('/small', { 'content-length': Buffer.byteLength(small) }, (req) => req.end(small)));
       console.log('clean=' + await post('/clean', { 'content-length': 10 }, (req) => req.end('token=none')));
       console.log('chunked=' + await post('/chunked', { 'transfer-encoding': 'chunked', trailer: 'x-sum' }, (req) => { req.write('abc'); req.addTrailers({ 'x-sum': '3' }); req.end(); }));
       // 200 KiB, chunked: the placeholder comes in two writes, its start ending the first.
       console.log('big=' + await post('/big', { 'transfer-encoding': 'chunked' }, (req) => {
         req.write(Buffer.alloc(100 * 1024, 'a'));
         req.write(Buffer.concat([Buffer.alloc(50 * 1024, 'b'), Buffer.from(placeholder.slice(0, 20))]), () => {
           setTimeout(() => { req.write(placeholder.slice(20)); req.end(Buffer.alloc(50 * 1024, 'c')); }, 300);
         });
       }));`,
    );
    expect(r.output).toMatch(/small=403 procctl proxy: blocked 127\.0\.0\.2: credential_elsewhere: the request's body carries \$PROCCTL_CRED_API, which is sent only to 127\.0\.0\.1; nothing was sent to 127\.0\.0\.2\n/);
    expect(r.output).toContain('clean=200 the other host got 10 bytes trailer=none\n');
    expect(r.output).toContain('chunked=200 the other host got 3 bytes trailer=3\n');
    expect(r.output).toMatch(/big=(403 procctl proxy: blocked 127\.0\.0\.2: credential_elsewhere: the request's body carries \$PROCCTL_CRED_API[^\n]*cut off before it reached 127\.0\.0\.2|error E[A-Z]+)\n/);
    // The other host finished only the clean requests; of the streamed one it got the start, never the placeholder nor its first bytes.
    expect(seen.other.slice(before)).toEqual([
      { url: '/clean', body: 'token=none' },
      { url: '/chunked', body: 'abc' },
    ]);
    const got = seen.bodies.slice(bodies);
    expect(got.some((b) => b.length >= 100 * 1024)).toBe(true);
    for (const b of got) expect(b.includes('procctl-placeholder-')).toBe(false);
    // Counted per host: both refusals, the first one's reason.
    const denied = await waitFor(async () => (await s.list()).find((x: any) => x.sessionId === r.sessionId && x.network?.denied?.[0]?.count >= 2)?.network.denied, { what: 'both refusals counted' });
    expect(denied).toHaveLength(1);
    expect(denied[0]).toMatchObject({ host: '127.0.0.2', count: 2 });
    expect(denied[0].reason).toMatch(/^credential_elsewhere: the request's body carries \$PROCCTL_CRED_API/);
  });

  it("another credential's placeholder in a body to a credential host: the stream to the upstream is cut before it leaves", async () => {
    const before = seen.h2.length;
    const bodies = seen.bodies.length;
    const r = await run(
      'h2body.mjs',
      `import http2 from 'node:http2'; import { tlsTo } from './lib.mjs';
       const t = await tlsTo(${ports.h2}, 'h2');
       const session = http2.connect('https://127.0.0.1:${ports.h2}', { createConnection: () => t });
       const st = session.request({ ':method': 'POST', ':path': '/leak' });
       let body = '';
       st.on('response', (h) => (body += h[':status'] + ' '));
       st.on('data', (c) => (body += c));
       st.on('end', () => { console.log('answer=' + body.trim()); session.close(); });
       st.on('error', (e) => { console.log('error ' + e.message); session.close(); });
       st.end('key=' + process.env.PROCCTL_CRED_ELSE);`,
    );
    expect(r.output).toMatch(/answer=403 procctl proxy: blocked 127\.0\.0\.1: credential_elsewhere: the request's body carries \$PROCCTL_CRED_ELSE, which is sent only to else\.example; the request was cut off/);
    expect(seen.h2.length).toBe(before);
    for (const b of seen.bodies.slice(bodies)) expect(b.includes('procctl-placeholder-')).toBe(false);
  });

  it('an HTTP/2 CONNECT inside a credential host (a WebSocket over HTTP/2) is answered 501 saying to use HTTP/1.1', async () => {
    const r = await run(
      'h2connect.mjs',
      `import http2 from 'node:http2'; import { tlsTo } from './lib.mjs';
       const t = await tlsTo(${ports.h2}, 'h2');
       const session = http2.connect('https://127.0.0.1:${ports.h2}', { createConnection: () => t });
       session.on('remoteSettings', (s) => console.log('enableConnectProtocol=' + Boolean(s.enableConnectProtocol)));
       const st = session.request({ ':method': 'CONNECT', ':authority': '127.0.0.1:${ports.h2}' });
       let body = '';
       st.on('response', (h) => (body += h[':status'] + ' '));
       st.on('data', (c) => (body += c));
       st.on('end', () => { console.log('answer=' + body.trim()); session.close(); });
       st.on('error', (e) => { console.log('error ' + e.message); session.close(); });
       st.end();`,
    );
    expect(r.output).toContain('enableConnectProtocol=false\n');
    expect(r.output).toMatch(/answer=501 procctl proxy: CONNECT inside the TLS of a credential's host \(a WebSocket over HTTP\/2, RFC 8441, or a tunnel\) is not supported; open the WebSocket over HTTP\/1\.1/);
  });
});
