import { generateKeyPairSync } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import forge from 'node-forge';
import type { BenchOptions } from './lib/options.js';
import { BenchDaemon } from './lib/daemon.js';
import { systemRoots } from '../src/netproxy/ca.js';
import type { Metric } from './lib/report.js';
import { median, round } from './lib/stats.js';

const BIG = 100 * 1024 * 1024;
const VALUE = 'Bearer bench-credential-0123456789abcdef';

/**
 * Benchmark: what writing a credential in costs (SPEC §21). One sandboxed daemon whose sessions
 * reach a local HTTPS server two ways, with the same curl inside the sandbox: as a credential's
 * host (127.0.0.1), where the proxy ends TLS, writes the header and sends the request on over TLS
 * of its own; and as a plain allowed host (127.0.0.2, the same server), where CONNECT is an opaque
 * tunnel the kernel relays. Time to first byte of a small GET (curl's time_starttransfer, a new
 * curl and so a new TLS handshake each), and the throughput of a 100 MiB download. Targets
 * (issue 37): first byte at most 1.3x the tunnel's, the download at least 0.8x the tunnel's.
 */
export async function credentialsCost(opts: BenchOptions): Promise<Metric[]> {
  const gets = opts.quick ? 20 : 60;
  const downloads = opts.quick ? 1 : 3;
  // Not under /tmp: a sandbox has a private one, and the tunnel's curl reads the CA from here.
  const dir = mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : tmpdir(), 'procctl-bench-cred-'));
  const pki = makePki();
  const caFile = join(dir, 'ca.pem');
  writeFileSync(caFile, pki.caPem);
  // The tunnel's curl trusts a bundle as large as the one the daemon gives jobs (the system's roots and one CA):
  // curl reads the whole bundle at every start, and the two ways should pay the same for it.
  const tunnelBundle = join(dir, 'tunnel-bundle.pem');
  writeFileSync(tunnelBundle, `${systemRoots().trimEnd()}\n${pki.caPem}`);
  const chunk = Buffer.alloc(256 * 1024, 97);
  const handler = (q: import('node:http').IncomingMessage, r: import('node:http').ServerResponse) => {
    if (q.url !== '/big') return r.end('small answer\n');
    r.writeHead(200, { 'content-length': String(BIG) });
    let sent = 0;
    const more = () => {
      while (sent < BIG) {
        sent += chunk.length;
        if (!r.write(chunk)) return void r.once('drain', more);
      }
      r.end();
    };
    more();
  };
  const servers: Server[] = [];
  const listen = async (host: string, port = 0) => {
    const server = createServer({ key: pki.keyPem, cert: pki.certPem }, handler);
    servers.push(server);
    await new Promise<void>((r) => server.listen(port, host, r));
    return (server.address() as { port: number }).port;
  };
  const port = await listen('127.0.0.1');
  await listen('127.0.0.2', port);
  const d = await BenchDaemon.start({}, {
    sandbox: {
      mode: 'read-only',
      network: { allow: ['127.0.0.2'], upstreamCa: caFile, credentials: [{ name: 'BENCH', hosts: ['127.0.0.1'], value: VALUE }] },
    },
  });
  const c = await d.client();
  opts.log(`credentials: ${gets} GETs (time to first byte) and ${opts.rounds} x ${downloads} downloads of 100 MiB, intercepted (credential written in) vs the plain CONNECT tunnel, curl in a sandbox`);
  const curl = (extra: string, url: string, what: string) => `curl -sS --noproxy "" ${extra} -o /dev/null -w '%{${what}}\\n' ${url}`;
  const times = async (command: string): Promise<number[]> => {
    const r = await c.call('exec', { command, yieldMs: 300_000, stdin: 'null' });
    if (r.status !== 'completed' || r.exitCode !== 0) throw new Error(`the bench job failed: ${String(r.text).slice(0, 400)}`);
    await c.call('process', { action: 'clear', sessionId: r.sessionId });
    return String(r.output).trim().split('\n').map(Number);
  };
  const loop = (cmd: string, n: number) => `for i in $(seq ${n}); do ${cmd}; done`;
  // The intercepted way trusts the bundle the daemon gives (SSL_CERT_FILE); the tunnel reaches the server's own certificate.
  const via = { intercepted: { host: '127.0.0.1', extra: '' }, tunnel: { host: '127.0.0.2', extra: `--cacert ${tunnelBundle}` } };
  const ttfb = { intercepted: [] as number[], tunnel: [] as number[] };
  const speed = { intercepted: [] as number[], tunnel: [] as number[] };
  try {
    for (let r = 0; r < opts.rounds; r++) {
      const first = { intercepted: [] as number[], tunnel: [] as number[] };
      const perChunk = Math.max(1, Math.round(gets / 5));
      for (let done = 0; done < gets; done += perChunk) {
        for (const way of ['intercepted', 'tunnel'] as const) {
          first[way].push(...(await times(loop(curl(via[way].extra, `https://${via[way].host}:${port}/small`, 'time_starttransfer'), perChunk))));
        }
      }
      for (const way of ['intercepted', 'tunnel'] as const) ttfb[way].push(median(first[way]) * 1000);
      const got = { intercepted: [] as number[], tunnel: [] as number[] };
      for (let k = 0; k < downloads; k++) {
        for (const way of ['intercepted', 'tunnel'] as const) got[way].push((await times(curl(via[way].extra, `https://${via[way].host}:${port}/big`, 'speed_download')))[0] / 1e6);
      }
      for (const way of ['intercepted', 'tunnel'] as const) speed[way].push(median(got[way]));
      opts.log(
        `  round ${r + 1}: first byte ${round(ttfb.intercepted.at(-1)!, 2)} ms intercepted vs ${round(ttfb.tunnel.at(-1)!, 2)} ms tunnelled; ` +
          `100 MiB at ${round(speed.intercepted.at(-1)!, 0)} MB/s intercepted vs ${round(speed.tunnel.at(-1)!, 0)} MB/s tunnelled`,
      );
    }
  } finally {
    c.close();
    await d.stop();
    for (const s of servers) s.close();
    rmSync(dir, { recursive: true, force: true });
  }
  const per = (a: number[], b: number[]) => a.map((x, i) => x / b[i]);
  const row = (name: string, rounds: number[], detail: string, target: Metric['target']): Metric => ({
    bench: 'credentials',
    name,
    value: median(rounds),
    unit: 'x',
    target,
    rounds: rounds.map((x) => round(x, 2)),
    detail,
  });
  return [
    row(
      'credentials: first byte of an HTTPS GET, intercepted / tunnel',
      per(ttfb.intercepted, ttfb.tunnel),
      `median per round of ${gets} GETs: ${round(median(ttfb.intercepted), 2)} ms with the credential written in vs ${round(median(ttfb.tunnel), 2)} ms through the opaque tunnel (curl time_starttransfer, a new TLS handshake each)`,
      { op: '<=', value: 1.3 },
    ),
    row(
      'credentials: 100 MiB over HTTPS, intercepted / tunnel',
      per(speed.intercepted, speed.tunnel),
      `${round(median(speed.intercepted), 0)} MB/s with the proxy ending TLS vs ${round(median(speed.tunnel), 0)} MB/s through the kernel-relayed tunnel (curl speed_download)`,
      { op: '>=', value: 0.8 },
    ),
  ];
}

/** The bench's own CA and a certificate for 127.0.0.1 and 127.0.0.2 (the daemon trusts it as upstreamCa). */
function makePki(): { caPem: string; certPem: string; keyPem: string } {
  const caKeys = keyPair();
  const ca = forge.pki.createCertificate();
  ca.publicKey = caKeys.publicKey;
  ca.serialNumber = '01';
  ca.validity.notBefore = new Date(Date.now() - 86_400_000);
  ca.validity.notAfter = new Date(Date.now() + 86_400_000);
  const caName = [{ name: 'commonName', value: 'procctl bench CA' }];
  ca.setSubject(caName);
  ca.setIssuer(caName);
  ca.setExtensions([{ name: 'basicConstraints', cA: true, critical: true }, { name: 'keyUsage', keyCertSign: true, critical: true }]);
  ca.sign(caKeys.privateKey, forge.md.sha256.create());
  const keys = keyPair();
  const leaf = forge.pki.createCertificate();
  leaf.publicKey = keys.publicKey;
  leaf.serialNumber = '02';
  leaf.validity.notBefore = ca.validity.notBefore;
  leaf.validity.notAfter = ca.validity.notAfter;
  leaf.setSubject([{ name: 'commonName', value: '127.0.0.1' }]);
  leaf.setIssuer(caName);
  leaf.setExtensions([{ name: 'subjectAltName', altNames: [{ type: 7, ip: '127.0.0.1' }, { type: 7, ip: '127.0.0.2' }] }, { name: 'extKeyUsage', serverAuth: true }]);
  leaf.sign(caKeys.privateKey, forge.md.sha256.create());
  return { caPem: forge.pki.certificateToPem(ca), certPem: forge.pki.certificateToPem(leaf), keyPem: forge.pki.privateKeyToPem(keys.privateKey) };
}

/** An RSA key pair made by Node's crypto (forge's own is slow), as forge's objects. */
function keyPair(): { publicKey: forge.pki.PublicKey; privateKey: forge.pki.rsa.PrivateKey } {
  const k = generateKeyPairSync('rsa', { modulusLength: 2048 });
  return {
    publicKey: forge.pki.publicKeyFromPem(k.publicKey.export({ type: 'spki', format: 'pem' }).toString()),
    privateKey: forge.pki.privateKeyFromPem(k.privateKey.export({ type: 'pkcs1', format: 'pem' }).toString()) as forge.pki.rsa.PrivateKey,
  };
}
