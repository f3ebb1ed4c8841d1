import { lookup } from 'node:dns/promises';
import { Agent, createServer as createHttpServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { connect, isIP, type Socket } from 'node:net';
import { Transform, type Duplex } from 'node:stream';
import { TLSSocket } from 'node:tls';
import { Scrubber } from '../base/scrub.js';
import type { ProxyCa } from './ca.js';
import { matches, refusedAddress, refusedName, type ByName } from './policy.js';
import { socks5 } from './socks5.js';
import { splice, type Hold } from './splice.js';

/** Who a proxied stream belongs to: the session's policy, and where its refusals are counted. */
export interface ProxyClient {
  policy: ByName;
  /** A destination was refused, and why (counted on the session, told in its text and an event). */
  denied(host: string, reason: string): void;
  /** Count a tunnel the kernel relays with the session, which closes it at its end. */
  hold?: Hold;
  /** The session's credentials (SPEC §21): written into its requests to their hosts, over TLS the proxy ends. */
  credentials?: readonly ProxyCredential[];
  /** The CAs trusted for the credentials' hosts (sandbox.network.upstreamCa, PEM), instead of the system's roots. */
  upstreamCa?: string;
  /** A credential was written into a request to `host` (audited and counted). */
  used?(name: string, host: string): void;
}

/** One credential as the proxy holds it for a session (sandbox/credentials.ts makes them). */
export interface ProxyCredential {
  name: string;
  hosts: readonly string[];
  /** Lower case. */
  header: string;
  value: string;
  placeholder: string;
}

/** The start of the reason of a refusal for carrying a credential's placeholder elsewhere (SPEC §21). */
export const CREDENTIAL_ELSEWHERE = 'credential_elsewhere';

const CLIENT = Symbol('procctl.proxyClient');
const TARGET = Symbol('procctl.proxyTarget');
type Tagged = Socket & { [CLIENT]?: ProxyClient; [TARGET]?: { host: string; port: number } };

/**
 * Where a sandboxed job's traffic goes (SPEC §12 "Network by name"): every stream a job opens to
 * its proxy is one of HTTP (a request with an absolute http:// URL, forwarded), CONNECT (a
 * tunnel: TLS stays end to end) or SOCKS5 (CONNECT, for git over ssh), told apart by its first
 * byte. A destination goes through only when its name passes the policy and the address it
 * resolves to does too; else the job gets HTTP 403 (or SOCKS5's "not allowed by ruleset") with
 * the reason, and the session counts it.
 */
export class NetProxy {
  private readonly http = createHttpServer();
  /** Requests inside the TLS the proxy ends for a credential's host (SPEC §21), in origin form. */
  private readonly inner = createHttpServer();
  /** Each session's kept-alive connections for plain HTTP, closed with its other streams at its end. */
  private readonly agents = new WeakMap<ProxyClient, Agent>();
  /** The same for the credentials' hosts, over TLS verified against the system's roots or upstreamCa. */
  private readonly tlsAgents = new WeakMap<ProxyClient, HttpsAgent>();

  /** `ca`: the daemon's CA, for the credentials' hosts (made at the daemon's start when the config has credentials). */
  constructor(private readonly ca: () => ProxyCa | undefined = () => undefined) {
    this.http.on('request', (req, res) => void this.forward(req, res));
    this.http.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket as Socket, head));
    this.http.on('clientError', (_err, socket) => socket.destroy());
    this.inner.on('request', (req, res) => void this.forwardTls(req, res));
    this.inner.on('clientError', (_err, socket) => socket.destroy());
  }

  /** Serve one stream from a job. */
  serve(socket: Socket, client: ProxyClient): void {
    socket.on('error', () => socket.destroy());
    socket.once('data', (first: Buffer) => {
      socket.pause();
      socket.unshift(first);
      if (first[0] === 0x05) {
        void socks5(socket, (host, port) => this.open(host, port, client), client.hold).catch(() => socket.destroy());
      } else {
        (socket as Tagged)[CLIENT] = client;
        this.http.emit('connection', socket);
        socket.resume();
      }
    });
  }

  /**
   * A connection to `host:port` if the policy lets it through, else the reason. The name is
   * judged first, then every address it resolves to: the first one the policy allows is used.
   */
  async open(host: string, port: number, client: ProxyClient): Promise<Socket | { refused: string }> {
    const to = await this.allowed(host, client);
    if ('refused' in to) return to;
    return new Promise((resolve) => {
      const upstream = connect({ host: to.address, port });
      upstream.once('connect', () => resolve(upstream));
      upstream.once('error', (err) => resolve({ refused: `cannot connect to ${to.name}:${port} (${(err as NodeJS.ErrnoException).code ?? err.message})` }));
    });
  }

  /** The address a stream to `host` may go to (the first of its addresses the policy allows), or why none may. */
  private async allowed(host: string, client: ProxyClient): Promise<{ name: string; address: string } | { refused: string }> {
    const name = host.replace(/^\[(.*)\]$/, '$1');
    const byName = refusedName(name, client.policy);
    if (byName) return this.refuse(client, name, byName);
    let addresses: string[];
    try {
      addresses = isIP(name) ? [name] : (await lookup(name, { all: true, verbatim: true })).map((a) => a.address);
    } catch (err) {
      return { refused: `${name} does not resolve (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})` };
    }
    let why: string | undefined;
    for (const a of addresses) {
      const refused = refusedAddress(name, a, client.policy);
      if (refused === undefined) return { name, address: a };
      why ??= refused;
    }
    return this.refuse(client, name, why ?? `${name} has no address`);
  }

  /**
   * The session's pool of plain-HTTP connections: a request is judged by the policy every time,
   * and then goes out on a connection kept from an earlier request of the same session to the
   * same address and port when one is free (a fresh connection per request cost a TCP handshake
   * and the server's accept before the first byte). Never shared between sessions; closed, with
   * the session's other streams, at its end.
   */
  private agentOf(client: ProxyClient): Agent {
    let agent = this.agents.get(client);
    if (!agent) {
      const made = new Agent({ keepAlive: true, maxFreeSockets: POOLED_PER_DESTINATION, timeout: POOLED_IDLE_MS });
      client.hold?.({ close: () => made.destroy() });
      this.agents.set(client, made);
      agent = made;
    }
    return agent;
  }

  private refuse(client: ProxyClient, host: string, reason: string): { refused: string } {
    client.denied(host, reason);
    return { refused: `blocked ${host}: ${reason}` };
  }

  private async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const client = (req.socket as Tagged)[CLIENT];
    let url: URL;
    try {
      url = new URL(req.url ?? '');
    } catch {
      return answer(res, 400, 'procctl proxy: send an absolute http:// URL (this is a forward proxy; https goes through CONNECT)');
    }
    if (!client || url.protocol !== 'http:') return answer(res, 400, 'procctl proxy: only http:// URLs are forwarded; https goes through CONNECT');
    const stray = strayPlaceholder(client, url.hostname, [req.url ?? '', ...req.rawHeaders]);
    if (stray) return answer(res, 403, `procctl proxy: ${this.refuse(client, url.hostname, stray).refused}\n`);
    const mine = credentialsFor(client, url.hostname);
    if (mine.length > 0) {
      const why = `${CREDENTIAL_PLAIN}: the proxy writes credential ${mine.map((c) => c.name).join(', ')} only into requests it sends over TLS it has verified; use https://${url.host}${url.pathname}`;
      return answer(res, 403, `procctl proxy: ${this.refuse(client, url.hostname, why).refused}\n`);
    }
    const port = Number(url.port || 80);
    const to = await this.allowed(url.hostname, client);
    if ('refused' in to) return answer(res, to.refused.startsWith('blocked ') ? 403 : 502, `procctl proxy: ${to.refused}\n`);
    const headers = { ...req.headers };
    for (const h of ['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive']) delete headers[h];
    const upstream = httpRequest({ agent: this.agentOf(client), host: to.address, port, method: req.method, path: `${url.pathname}${url.search}`, headers: { ...headers, host: url.host } }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    upstream.on('error', (err) => {
      const code = (err as NodeJS.ErrnoException).code;
      const why = code && CONNECT_ERRORS.has(code) && !res.headersSent ? `cannot connect to ${to.name}:${port} (${code})` : `${url.host}: ${err.message}`;
      if (!res.headersSent) answer(res, 502, `procctl proxy: ${why}\n`);
      else res.destroy();
    });
    req.pipe(upstream);
  }

  private async tunnel(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const client = (socket as Tagged)[CLIENT];
    const m = /^(\[[^\]]+\]|[^:]+):(\d+)$/.exec(req.url ?? '');
    if (!client || !m) {
      socket.end('HTTP/1.1 400 Bad Request\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nprocctl proxy: CONNECT takes host:port\n');
      return;
    }
    const host = m[1].replace(/^\[(.*)\]$/, '$1');
    const stray = strayPlaceholder(client, host, [req.url ?? '', ...req.rawHeaders]);
    if (stray) {
      socket.end(`HTTP/1.1 403 Forbidden\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nprocctl proxy: ${this.refuse(client, host, stray).refused}\n`);
      return;
    }
    if (credentialsFor(client, host).length > 0) return this.intercept(socket, head, host, Number(m[2]), client);
    const up = await this.open(m[1], Number(m[2]), client);
    if ('refused' in up) {
      const status = up.refused.startsWith('blocked ') ? '403 Forbidden' : '502 Bad Gateway';
      socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nprocctl proxy: ${up.refused}\n`);
      return;
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) up.write(head);
    splice(socket, up, client.hold);
  }

  /**
   * A credential's host (SPEC §21): the proxy ends the job's TLS itself, with a certificate its
   * CA signs for the host, and serves the requests inside as HTTP/1.1 (forwardTls). Nothing goes
   * upstream before a request has been judged.
   */
  private intercept(socket: Socket, head: Buffer, host: string, port: number, client: ProxyClient): void {
    const ca = this.ca();
    if (!ca) {
      socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nprocctl proxy: the daemon has no CA to end TLS with for this credential host (its state directory was not writable at start?)\n');
      return;
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    if (head.length > 0) socket.unshift(head);
    let secured = false;
    const tls = new TLSSocket(socket, { isServer: true, secureContext: ca.contextFor(host), ALPNProtocols: ['http/1.1'] }) as Tagged & TLSSocket;
    tls.once('secure', () => (secured = true));
    tls.on('error', (err) => {
      if (!secured) {
        const alert = /alert ([a-z ]+)/i.exec(err.message)?.[1] ?? (err as NodeJS.ErrnoException).code ?? err.message;
        this.refuse(
          client,
          host,
          `${CREDENTIAL_TLS}: the job's client did not accept the certificate the proxy gives for ${host} (${alert}): it pins ${host}'s own certificate, or does not trust the bundle in $SSL_CERT_FILE; a credential can only be written in for clients that trust the proxy's CA`,
        );
      }
      tls.destroy();
      socket.destroy();
    });
    tls[CLIENT] = client;
    tls[TARGET] = { host, port };
    this.inner.emit('connection', tls);
  }

  /** One request inside the TLS the proxy ended: judged, the credential written in, sent upstream over verified TLS, the answer scrubbed. */
  private async forwardTls(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const socket = req.socket as Tagged;
    const client = socket[CLIENT];
    const target = socket[TARGET];
    if (!client || !target) return answer(res, 500, 'procctl proxy: a request on a connection the proxy did not open\n');
    const { host, port } = target;
    const stray = strayPlaceholder(client, host, [req.url ?? '', ...req.rawHeaders]);
    if (stray) return answer(res, 403, `procctl proxy: ${this.refuse(client, host, stray).refused}\n`);
    const to = await this.allowed(host, client);
    if ('refused' in to) return answer(res, to.refused.startsWith('blocked ') ? 403 : 502, `procctl proxy: ${to.refused}\n`);
    const mine = credentialsFor(client, host);
    const headers: Record<string, string | string[]> = {};
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i].toLowerCase();
      if (HOP.has(name)) continue;
      let value = req.rawHeaders[i + 1];
      for (const c of mine) if (value.includes(c.placeholder)) value = value.split(c.placeholder).join(c.value);
      const had = headers[name];
      headers[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
    }
    for (const c of mine) headers[c.header] = c.value;
    let path = req.url ?? '/';
    for (const c of mine) if (path.includes(c.placeholder)) path = path.split(c.placeholder).join(encodeURIComponent(c.value));
    const masks = mine.map((c) => ({ find: c.value, put: '*'.repeat(Buffer.byteLength(c.value)) }));
    const upstream = httpsRequest(
      {
        agent: this.tlsAgentOf(client),
        host: to.address,
        port,
        servername: isIP(host) ? undefined : host,
        method: req.method,
        path,
        // The host the tunnel was asked for, whatever Host the job wrote: a server that hosts many
        // names (a CDN) must not route the credential to another of its tenants (domain fronting).
        headers: { ...headers, host: authority(host, port) },
      },
      (r) => {
        for (const c of mine) client.used?.(c.name, host);
        // What the upstream says back never carries the value to the job: masked, at its own length (the body's length stays right).
        const scrub = new Scrubber(masks);
        const raw: string[] = [];
        for (let i = 0; i < r.rawHeaders.length; i += 2) {
          if (HOP.has(r.rawHeaders[i].toLowerCase())) continue;
          raw.push(r.rawHeaders[i], scrub.text(r.rawHeaders[i + 1]));
        }
        res.writeHead(r.statusCode ?? 502, r.statusMessage, raw);
        r.pipe(scrubbing(new Scrubber(masks))).pipe(res);
      },
    );
    upstream.on('error', (err) => {
      const code = (err as NodeJS.ErrnoException).code ?? '';
      let why: string;
      if (UNTRUSTED.test(code) || /certificate|self.signed/i.test(err.message)) {
        why = this.refuse(
          client,
          host,
          `${CREDENTIAL_UPSTREAM}: ${host}'s certificate is not trusted (${code || err.message}); the proxy sends a credential only to a host it has verified against the system's roots${client.upstreamCa ? ' and sandbox.network.upstreamCa' : ', or sandbox.network.upstreamCa (a PEM file) when the host is yours'}`,
        ).refused;
      } else why = CONNECT_ERRORS.has(code) && !res.headersSent ? `cannot connect to ${host}:${port} (${code})` : `${host}: ${err.message}`;
      if (!res.headersSent) answer(res, 502, `procctl proxy: ${why}\n`);
      else res.destroy();
    });
    req.pipe(upstream);
  }

  /** The session's pool of verified TLS connections to its credentials' hosts (as agentOf, for HTTPS). */
  private tlsAgentOf(client: ProxyClient): HttpsAgent {
    let agent = this.tlsAgents.get(client);
    if (!agent) {
      const made = new HttpsAgent({ keepAlive: true, maxFreeSockets: POOLED_PER_DESTINATION, timeout: POOLED_IDLE_MS, ...(client.upstreamCa ? { ca: client.upstreamCa } : {}) });
      client.hold?.({ close: () => made.destroy() });
      this.tlsAgents.set(client, made);
      agent = made;
    }
    return agent;
  }
}

/** Refusals of a credential's host, said in the reason's first word (docs/credentials.md). */
const CREDENTIAL_PLAIN = 'credential_plain_http';
const CREDENTIAL_TLS = 'credential_tls_refused';
const CREDENTIAL_UPSTREAM = 'credential_untrusted_upstream';

/** Headers of one hop, never passed on. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'proxy-authorization', 'proxy-authenticate', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host']);

/** Node's codes for a certificate it does not trust. */
const UNTRUSTED = /^(UNABLE_TO_|SELF_SIGNED|DEPTH_ZERO|CERT_|ERR_TLS_CERT)/;

/** `host:port` as a Host header says it (the port left out when it is HTTPS's own). */
function authority(host: string, port: number): string {
  const name = isIP(host) === 6 ? `[${host}]` : host;
  return port === 443 ? name : `${name}:${port}`;
}

/** The credentials of the session whose hosts include `host`. */
function credentialsFor(client: ProxyClient, host: string): readonly ProxyCredential[] {
  if (!client.credentials?.length) return [];
  const h = host.toLowerCase().replace(/\.$/, '');
  return client.credentials.filter((c) => c.hosts.some((p) => matches(h, p)));
}

/** Why a request to `host` is refused for carrying the placeholder of a credential not meant for it, or undefined. */
function strayPlaceholder(client: ProxyClient, host: string, texts: readonly string[]): string | undefined {
  if (!client.credentials?.length) return undefined;
  const h = host.toLowerCase().replace(/\.$/, '');
  for (const c of client.credentials) {
    if (c.hosts.some((p) => matches(h, p))) continue;
    if (texts.some((t) => t.includes(c.placeholder))) {
      return `${CREDENTIAL_ELSEWHERE}: the request carries $PROCCTL_CRED_${c.name}, which is sent only to ${c.hosts.join(', ')}; nothing was sent to ${host}`;
    }
  }
  return undefined;
}

/** A stream that passes bytes through a Scrubber. */
function scrubbing(scrub: Scrubber): Transform {
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      done(null, scrub.write(chunk));
    },
    flush(done) {
      done(null, scrub.end());
    },
  });
}

/** Kept-alive connections a session may hold free per destination, and how long an idle one is kept. */
const POOLED_PER_DESTINATION = 4;
const POOLED_IDLE_MS = 15_000;

/** Errors of a connection that never opened: said as "cannot connect", as for a tunnel. */
const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET', 'EADDRNOTAVAIL']);

function answer(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'content-type': 'text/plain', connection: 'close' });
  res.end(text);
}
