import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { testPki } from '../helpers/pki.js';
import { Scoped } from '../helpers/session.js';
import { NetFixture, servedRepo, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * Credentials a job uses but never sees (SPEC §21), with real clients inside a real sandbox:
 * curl, git, node and python reach a local HTTPS server (its own CA, given to the daemon as
 * upstreamCa) through the daemon's proxy, which writes the credential in; the job holds only a
 * placeholder, and the placeholder sent anywhere else is refused before that host sees anything.
 */

const has = (cmd: string, args: string[]) => spawnSync(cmd, args, { stdio: 'ignore' }).status === 0;
const MISSING = [
  ['curl', has('curl', ['--version'])],
  ['git', has('git', ['--version'])],
  ['python3', has('python3', ['--version'])],
]
  .filter(([, ok]) => !ok)
  .map(([name]) => name);
if (MISSING.length > 0 && !SKIP_SANDBOX) console.warn(`skipping the credential tests: ${MISSING.join(', ')} not installed (Debian: apt-get install -y ${MISSING.join(' ')})`);
const SKIP = SKIP_SANDBOX || MISSING.length > 0;

const USER = 'builder';
const PASS = 'pw-0f9c2e7d51ab';
/** The real value: HTTP basic auth, as git and the API routes both take it. */
const VALUE = `Basic ${Buffer.from(`${USER}:${PASS}`).toString('base64')}`;
/** A second credential, read from a variable of the daemon's that env.exclude does not withhold by name. */
const ENV_VALUE = 'Bearer env-9d2be0c4a7f1e3';

const net = new NetFixture('procctl-cred-');
const { base } = net;
const ports: Record<string, number> = {};
/** Requests each server was sent (path and authorization), and connections the tunnel server got. */
const seen: { good: { url: string; auth?: string }[]; other: string[]; otherTls: number; untrusted: string[] } = { good: [], other: [], otherTls: 0, untrusted: [] };
let d: TestDaemon;
let s: Scoped;

beforeAll(async () => {
  if (SKIP) return;
  const good = testPki('127.0.0.1 test CA', '127.0.0.1');
  const bad = testPki('127.0.0.3 test CA', '127.0.0.3');
  writeFileSync(join(base, 'upstream-ca.pem'), good.caPem);
  // A bare repository served as static files (git's dumb HTTP) behind basic auth.
  servedRepo(join(base, 'src-repo'), join(base, 'served', 'repo.git'), 'README', 'cloned with a credential the job never saw\n');

  ports.good = await net.listen(
    createHttpsServer({ key: good.keyPem, cert: good.certPem }, (q, r) => {
      seen.good.push({ url: q.url!, auth: q.headers.authorization });
      const auth = q.headers.authorization;
      if (auth !== VALUE && auth !== ENV_VALUE) {
        r.writeHead(401, { 'www-authenticate': 'Basic realm="test"' }).end('unauthorized\n');
        return;
      }
      const path = new URL(q.url!, 'https://x').pathname;
      if (path === '/whoami') return void r.end(`ok ${auth === VALUE ? 'basic' : 'bearer'}\n`);
      // An upstream that echoes the credential back, in a header and the body.
      if (path === '/echo') return void r.writeHead(200, { 'x-echo': String(auth) }).end(`you sent: ${auth}\n`);
      if (path === '/header') return void r.end(`x-api-key=${String(q.headers['x-api-key'])}\n`);
      if (path === '/host') return void r.end(`host=${String(q.headers.host)}\n`);
      try {
        r.end(readFileSync(join(base, 'served', decodeURIComponent(path))));
      } catch {
        r.statusCode = 404;
        r.end();
      }
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
  ports.otherTls = await net.listen(
    createTcpServer((c) => {
      seen.otherTls++;
      c.destroy();
    }),
    '127.0.0.2',
  );
  ports.untrusted = await net.listen(
    createHttpsServer({ key: bad.keyPem, cert: bad.certPem }, (q, r) => {
      seen.untrusted.push(q.url!);
      r.end('should never be read\n');
    }),
    '127.0.0.3',
  );
  d = await startDaemon({
    env: { PROCCTL_TEST_CRED_SOURCE: ENV_VALUE },
    config: {
      sandbox: {
        mode: 'workspace-write',
        workspaces: [base],
        network: {
          allow: ['127.0.0.2'],
          upstreamCa: join(base, 'upstream-ca.pem'),
          credentials: [
            { name: 'API', hosts: ['127.0.0.1'], value: VALUE },
            { name: 'BAD', hosts: ['127.0.0.3'], value: 'Bearer bad-3c1d9e' },
          ],
        },
      },
      scopes: { envcred: { network: { allow: ['127.0.0.2'], upstreamCa: join(base, 'upstream-ca.pem'), credentials: [{ name: 'TOKEN', hosts: ['127.0.0.1'], header: 'x-api-key', valueEnv: 'PROCCTL_TEST_CRED_SOURCE' }] } } },
    },
  });
  s = new Scoped(await d.client(), 'cred');
}, 120_000);

afterAll(() => net.close(d));

const run = (command: string, scoped = s) => net.run(scoped, command);

// curl goes to 127.0.0.1 directly when NO_PROXY names it (the job's own loopback); these ask the proxy.
const CURL = 'curl -sS -m 20 --noproxy ""';
const NOPROXY = 'env -u NO_PROXY -u no_proxy';

describe.skipIf(SKIP)('credentials through the proxy, inside a real sandbox', () => {
  it('curl with the placeholder in the header, and with no header at all: the proxy writes the value in; the job never holds it', async () => {
    const r = await run(
      `echo "var=$PROCCTL_CRED_API"; ${CURL} -H "Authorization: $PROCCTL_CRED_API" https://127.0.0.1:${ports.good}/whoami; ${CURL} https://127.0.0.1:${ports.good}/whoami; ` +
        // The pattern is split in two so that the command itself (on the trail) does not carry the value.
        `env | grep -c '${PASS.slice(0, 5)}''${PASS.slice(5)}\\|${VALUE.slice(6, 12)}''${VALUE.slice(12)}' ; echo "bundle=$SSL_CERT_FILE"`,
    );
    expect(r.output).toMatch(/^var=procctl-placeholder-API-[A-Za-z0-9_-]{24}\n/);
    expect(r.output).toContain('ok basic\nok basic\n');
    // The job's environment holds no trace of the value.
    expect(r.output).toContain('\n0\n');
    expect(r.output).toMatch(/bundle=.*procctl-ca-bundle\.pem/);
    expect(r.network).toBeUndefined();
    // A placeholder is fresh per session.
    const again = await run('echo "$PROCCTL_CRED_API"');
    expect(again.output.trim()).not.toBe(/var=(\S+)/.exec(r.output)![1]);
    // Each use is on the trail, by name and host, never the value.
    const history = (await s.request('history', { sessionId: r.sessionId })).result;
    const used = history.records.filter((x: any) => x.type === 'credential_used');
    expect(used).toHaveLength(2);
    expect(used[0]).toMatchObject({ name: 'API', host: '127.0.0.1' });
    expect(JSON.stringify(history)).not.toContain(VALUE.slice(6));
  });

  it('an upstream that echoes the value back: the job reads it masked, and captured output never has it', async () => {
    const r = await run(`${CURL} -D - https://127.0.0.1:${ports.good}/echo; printf '%s\\n' '${VALUE}'`);
    expect(r.output).toContain(`you sent: ${'*'.repeat(VALUE.length)}`);
    expect(r.output.toLowerCase()).toContain(`x-echo: ${'*'.repeat(VALUE.length)}`);
    // A Host of the job's own choosing does not move the credential to another name the server hosts.
    const fronted = await run(`${CURL} -H 'Host: tenant.example' https://127.0.0.1:${ports.good}/host`);
    expect(fronted.output).toBe(`host=127.0.0.1:${ports.good}\n`);
    // Printed by the job itself (here, a value it was given some other way): scrubbed from what is captured.
    expect(r.output).toContain('[credential API]');
    expect(r.output).not.toContain(VALUE.slice(6));
  });

  it('git clones a repository behind basic auth over HTTPS, with nothing configured but the credential', async () => {
    const r = await run(`${NOPROXY} git clone -q https://127.0.0.1:${ports.good}/repo.git cloned && cat cloned/README; rm -rf cloned`);
    expect(r.exitCode).toBe(0);
    expect(r.output).toContain('cloned with a credential the job never saw');
    expect(seen.good.some((x) => x.url.startsWith('/repo.git/info/refs') && x.auth === VALUE)).toBe(true);
  });

  it("node (through a CONNECT tunnel, trusting NODE_EXTRA_CA_CERTS) and python's urllib work unchanged", async () => {
    const script = join(base, 'get.mjs');
    // Node 20's fetch does not read HTTPS_PROXY: the tunnel is asked for as any proxy-aware client asks.
    writeFileSync(
      script,
      `import http from 'node:http'; import https from 'node:https';
       const proxy = new URL(process.env.HTTPS_PROXY);
       const req = http.request({ host: proxy.hostname, port: proxy.port, method: 'CONNECT', path: '127.0.0.1:${ports.good}' });
       req.on('connect', (res, socket) => {
         https.get({ host: '127.0.0.1', port: ${ports.good}, path: '/whoami', socket, agent: false, headers: { authorization: process.env.PROCCTL_CRED_API } }, (r) => r.pipe(process.stdout))
           .on('error', (e) => console.log('node error', e.message));
       });
       req.end();`,
    );
    const node = await run(`${JSON.stringify(process.execPath)} ${JSON.stringify(script)}`);
    expect(node.output).toBe('ok basic\n');
    const py = await run(`${NOPROXY} python3 -c "import urllib.request; print(urllib.request.urlopen('https://127.0.0.1:${ports.good}/whoami').read().decode(), end='')"`);
    expect(py.output).toBe('ok basic\n');
  });

  it('a credential from the daemon\'s environment goes into its own header; the variable is not passed to the job', async () => {
    const other = new Scoped(s.c, 'envcred');
    const r = await run(`${CURL} https://127.0.0.1:${ports.good}/header; echo "src=\${PROCCTL_TEST_CRED_SOURCE:-unset}"; echo "$PROCCTL_CRED_TOKEN" | cut -c1-28`, other);
    // x-api-key carries the value; Authorization is left as the job sent it (none: 401 would be the answer).
    expect(r.output).toContain('unauthorized');
    expect(r.output).toContain('src=unset');
    expect(r.output).toContain('procctl-placeholder-TOKEN-');
    expect(seen.good.at(-1)?.auth).toBeUndefined();
    const h = await run(`${CURL} -H 'Authorization: ${ENV_VALUE.replace('env', 'xxx')}' https://127.0.0.1:${ports.good}/header`, other);
    expect(h.output).toContain('unauthorized');
  });

  it('the placeholder sent to another allowed host is refused before that host sees anything: plain HTTP, a CONNECT line; told, counted, audited', async () => {
    const before = { other: seen.other.length, tls: seen.otherTls };
    const plain = await run(`${CURL} -w '%{http_code}\\n' -H "X-Token: $PROCCTL_CRED_API" http://127.0.0.2:${ports.other}/steal`);
    expect(plain.output).toContain('403');
    expect(plain.output).toContain('credential_elsewhere');
    expect(plain.text).toContain('credential_elsewhere');
    expect(plain.network.denied[0]).toMatchObject({ host: '127.0.0.2', count: 1 });
    expect(plain.network.denied[0].reason).toMatch(/^credential_elsewhere: the request carries \$PROCCTL_CRED_API/);
    const inUrl = await run(`${CURL} -o /dev/null -w '%{http_code}\\n' "http://127.0.0.2:${ports.other}/?t=$PROCCTL_CRED_API"`);
    expect(inUrl.output).toContain('403');
    const connect = await run(`${CURL} -o /dev/null -w '%{http_code}\\n' --proxy-header "X-Token: $PROCCTL_CRED_API" https://127.0.0.2:${ports.otherTls}/; echo "curl exit $?"`);
    expect(connect.network.denied[0].reason).toMatch(/^credential_elsewhere/);
    expect(seen.other.length).toBe(before.other);
    expect(seen.otherTls).toBe(before.tls);
    // The same host without the placeholder is reached: the refusal was the placeholder's, not the host's.
    const fine = await run(`${CURL} http://127.0.0.2:${ports.other}/fine`);
    expect(fine.output).toBe('the other host answered\n');
    const history = (await s.request('history', { sessionId: plain.sessionId })).result;
    expect(history.records.filter((x: any) => x.type === 'network_refused')[0].reason).toMatch(/^credential_elsewhere/);
  });

  it('an upstream whose certificate is not trusted is refused: the credential is never sent to it', async () => {
    const r = await run(`${CURL} -w '%{http_code}\\n' https://127.0.0.3:${ports.untrusted}/`);
    expect(r.output).toContain('502');
    expect(r.output).toContain("127.0.0.3's certificate is not trusted");
    expect(r.network.denied[0].reason).toMatch(/^credential_untrusted_upstream/);
    expect(seen.untrusted).toEqual([]);
  });

  it('a client that does not trust the proxy (pinning, or its own CA bundle) fails, and the session is told why', async () => {
    const r = await run(`${CURL} --cacert ${join(base, 'upstream-ca.pem')} https://127.0.0.1:${ports.good}/whoami; echo "curl exit $?"`);
    expect(r.output).toMatch(/curl exit (35|60)/);
    await waitFor(async () => (await s.list()).find((x: any) => x.sessionId === r.sessionId)?.network?.denied?.length > 0, { timeoutMs: 20_000, what: 'the refusal counted' });
    const listed = (await s.list()).find((x: any) => x.sessionId === r.sessionId);
    expect(listed.network.denied[0].reason).toMatch(/^credential_tls_refused: the job's client did not accept the certificate/);
  });

  it('daemon.status and policy check name the credentials a scope gets, never their values', async () => {
    const status = (await s.request('daemon.status', {})).result;
    expect(status.sandbox.credentials.map((c: any) => c.name)).toEqual(['API', 'BAD', 'TOKEN']);
    expect(status.sandbox.credentials[2]).toMatchObject({ hosts: ['127.0.0.1'], header: 'x-api-key', variable: 'PROCCTL_CRED_TOKEN', scopes: ['envcred'] });
    const check = (await s.request('policy.check', { command: 'curl https://127.0.0.1/' })).result;
    expect(check.text).toContain('API: 127.0.0.1 (written into Authorization; the job holds a placeholder in $PROCCTL_CRED_API)');
    for (const text of [JSON.stringify(status), JSON.stringify(check)]) {
      expect(text).not.toContain(VALUE.slice(6));
      expect(text).not.toContain('bad-3c1d9e');
      expect(text).not.toContain(ENV_VALUE.slice(7));
    }
  });

  it("the CA's key is unreadable inside; outside it is 0600", async () => {
    const caDir = join(d.env.PROCCTL_STATE_DIR!, 'ca');
    expect(readdirSync(caDir).sort()).toEqual(['ca.key', 'ca.pem']);
    const r = await run(`cat ${caDir}/ca.key 2>&1 | head -c 200; echo; ls -la ${caDir} 2>&1 | head -3`);
    expect(r.output).not.toContain('PRIVATE KEY');
    expect(readFileSync(join(caDir, 'ca.key'), 'utf8')).toContain('PRIVATE KEY');
  });
});
