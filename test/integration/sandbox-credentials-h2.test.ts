import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createSecureServer } from 'node:http2';
import { createServer as createHttpsServer } from 'node:https';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { testPki } from '../helpers/pki.js';
import { Scoped } from '../helpers/session.js';
import { NetFixture, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * HTTP/2 through the TLS the proxy ends for a credential's host (SPEC §21, issue 37 point 3):
 * the proxy offers h2 and http/1.1 to the job's client by ALPN, and speaks to the upstream as
 * the upstream's ALPN says. curl --http2 and node's http2 client inside a real sandbox; an
 * upstream that speaks only HTTP/2 and one that speaks only HTTP/1.1.
 */

const curlH2 = spawnSync('curl', ['--version'], { encoding: 'utf8' });
const NO_CURL_H2 = curlH2.status !== 0 || !/HTTP2/.test(curlH2.stdout);
if (NO_CURL_H2 && !SKIP_SANDBOX) console.warn('skipping the HTTP/2 credential tests: curl with HTTP/2 is not installed (Debian: apt-get install -y curl)');
const SKIP = SKIP_SANDBOX || NO_CURL_H2;

const VALUE = 'Bearer h2-value-4e1f0c9a7d';
const ELSE_VALUE = 'Bearer else-value-8a2b6c';
const net = new NetFixture('procctl-cred-h2-');
const { base } = net;
const ports: Record<string, number> = {};
/** What each upstream was sent: HTTP version, path, authorization. */
const seen: { h2: { version: string; url: string; auth?: string }[]; h1: { version: string; url: string; auth?: string }[]; other: string[] } = { h2: [], h1: [], other: [] };
let d: TestDaemon;
let s: Scoped;

beforeAll(async () => {
  if (SKIP) return;
  const pki = testPki('h2 test CA');
  writeFileSync(join(base, 'upstream-ca.pem'), pki.caPem);
  // Speaks HTTP/2 only: a request the proxy sent as HTTP/1.1 would fail its handshake.
  ports.h2 = await net.listen(
    createSecureServer({ key: pki.keyPem, cert: pki.certPem, allowHTTP1: false }, (q, r) => {
      seen.h2.push({ version: q.httpVersion, url: q.url, auth: q.headers.authorization });
      r.setHeader('x-echo', String(q.headers.authorization));
      r.end(`h2 upstream: you sent ${q.headers.authorization}\n`);
    }),
    '127.0.0.1',
  );
  // Speaks HTTP/1.1 only (Node's https server offers no ALPN).
  ports.h1 = await net.listen(
    createHttpsServer({ key: pki.keyPem, cert: pki.certPem }, (q, r) => {
      seen.h1.push({ version: q.httpVersion, url: q.url!, auth: q.headers.authorization });
      r.end(`h1 upstream: you sent ${q.headers.authorization}\n`);
    }),
    '127.0.0.1',
  );
  ports.other = await net.listen(
    createHttpServer((q, r) => {
      seen.other.push(q.url!);
      r.end('the other host answered\n');
    }),
    '127.0.0.2',
  );
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
            { name: 'ELSE', hosts: ['127.0.0.2'], value: ELSE_VALUE },
          ],
        },
      },
    },
  });
  s = new Scoped(await d.client(), 'credh2');
}, 120_000);

afterAll(() => net.close(d));

const run = (command: string) => net.run(s, command);

const CURL = 'curl -sS -m 20 --noproxy "" --http2';

describe.skipIf(SKIP)('HTTP/2 through the proxy that writes a credential in, inside a real sandbox', () => {
  it('curl --http2 speaks h2 to the proxy, to an h2 upstream and to an HTTP/1.1 one: the value written in, the answer masked', async () => {
    const r = await run(
      `${CURL} -D - -w 'version=%{http_version}\\n' -H "Authorization: $PROCCTL_CRED_API" https://127.0.0.1:${ports.h2}/one; ` +
        `${CURL} -w 'version=%{http_version}\\n' https://127.0.0.1:${ports.h1}/two`,
    );
    expect(r.exitCode).toBe(0);
    // h2 between the job and the proxy both times, whatever the upstream speaks.
    expect(r.output.match(/version=2\n/g)).toHaveLength(2);
    expect(r.output).toContain(`h2 upstream: you sent ${'*'.repeat(VALUE.length)}\n`);
    expect(r.output).toContain(`x-echo: ${'*'.repeat(VALUE.length)}`);
    expect(r.output).toContain(`h1 upstream: you sent ${'*'.repeat(VALUE.length)}\n`);
    expect(r.output).not.toContain(VALUE.slice(7));
    expect(seen.h2.at(-1)).toEqual({ version: '2.0', url: '/one', auth: VALUE });
    expect(seen.h1.at(-1)).toEqual({ version: '1.1', url: '/two', auth: VALUE });
    const history = (await s.request('history', { sessionId: r.sessionId })).result;
    expect(history.records.filter((x: any) => x.type === 'credential_used')).toHaveLength(2);
  });

  it("node's http2 client: one session through a CONNECT, the placeholder replaced; a stream carrying another credential's placeholder is refused and never sent", async () => {
    const script = join(base, 'h2.mjs');
    writeFileSync(
      script,
      `import http from 'node:http'; import http2 from 'node:http2'; import tls from 'node:tls';
       const proxy = new URL(process.env.HTTPS_PROXY);
       const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: '127.0.0.1:${ports.h2}' });
       req.on('connect', async (res, socket) => {
         const session = http2.connect('https://127.0.0.1:${ports.h2}', { createConnection: () => tls.connect({ socket, ALPNProtocols: ['h2'], host: '127.0.0.1' }) });
         session.on('error', (e) => console.log('session error', e.message));
         const ask = (path, headers) => new Promise((resolve) => {
           const st = session.request({ ':path': path, ...headers });
           let body = '';
           st.on('response', (h) => (body += h[':status'] + ' '));
           st.on('data', (c) => (body += c));
           st.on('end', () => resolve(body));
           st.on('error', (e) => resolve('stream error ' + e.message));
         });
         const one = await ask('/placeholder', { authorization: process.env.PROCCTL_CRED_API });
         const two = await ask('/stray', { 'x-else': process.env.PROCCTL_CRED_ELSE });
         console.log('alpn=' + session.alpnProtocol);
         console.log('one=' + one.trim());
         console.log('two=' + two.trim());
         session.close();
       });
       req.end();`,
    );
    const before = seen.h2.length;
    const r = await run(`${JSON.stringify(process.execPath)} ${JSON.stringify(script)}`);
    expect(r.output).toContain('alpn=h2\n');
    expect(r.output).toContain(`one=200 h2 upstream: you sent ${'*'.repeat(VALUE.length)}\n`);
    expect(r.output).toMatch(/two=403 procctl proxy: blocked 127\.0\.0\.1: credential_elsewhere: the request carries \$PROCCTL_CRED_ELSE/);
    // The upstream saw the first stream only, with the value written in.
    expect(seen.h2.slice(before)).toEqual([{ version: '2.0', url: '/placeholder', auth: VALUE }]);
    // Told by the proxy's TLS thread and counted on the session.
    const listed = await waitFor(async () => (await s.list()).find((x: any) => x.sessionId === r.sessionId && x.network?.denied?.length > 0), { what: 'the refusal counted' });
    expect(listed.network.denied[0]).toMatchObject({ host: '127.0.0.1' });
    expect(listed.network.denied[0].reason).toMatch(/^credential_elsewhere: the request carries \$PROCCTL_CRED_ELSE/);
  });
});
