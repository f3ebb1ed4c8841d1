import { lookup } from 'node:dns/promises';
import { ServerResponse, STATUS_CODES, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders } from 'node:http';
import {
  constants as h2constants,
  connect as http2Connect,
  createSecureServer,
  Http2ServerResponse,
  type ClientHttp2Session,
  type Http2SecureServer,
  type Http2ServerRequest,
} from 'node:http2';
import { Agent as HttpsAgent, request as httpsRequest } from 'node:https';
import { isIP, type Socket } from 'node:net';
import { Transform, type Duplex, type Readable } from 'node:stream';
import { connect as tlsConnect, type TLSSocket } from 'node:tls';
import { Scrubber } from '../base/scrub.js';
import { PlaceholderWatch, pumpBody } from './body-watch.js';
import { matches, refusedAddress, refusedName, type ByName } from './policy.js';
import type { Hold } from './splice.js';

/**
 * What the TLS the proxy ends for a credential's host needs of a session (SPEC §21): a plain
 * object and two callbacks, so that it can be served on the proxy's TLS thread (tls-thread.ts)
 * as well as on the daemon's own.
 */
export interface InterceptClient {
  policy: ByName;
  /** A destination was refused, and why (counted on the session, told in its text and an event). */
  denied(host: string, reason: string): void;
  /** Count what the session holds open (its pool of upstream connections), closed at its end. */
  hold?: Hold;
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
  /** Carried by a restart and no longer given by the config: why (a request to its hosts is refused saying so). */
  withdrawn?: string;
}

/** The start of the reason of a refusal for carrying a credential's placeholder elsewhere (SPEC §21). */
export const CREDENTIAL_ELSEWHERE = 'credential_elsewhere';
/** Refusals of a credential's host, said in the reason's first word (docs/credentials.md). */
export const CREDENTIAL_PLAIN = 'credential_plain_http';
const CREDENTIAL_TLS = 'credential_tls_refused';
const CREDENTIAL_UPSTREAM = 'credential_untrusted_upstream';

/**
 * The receive windows of the proxy's HTTP/2 sessions to an origin. HTTP/2 starts every stream and
 * the connection at 64 KiB, so a download from an h2 origin stalls every 64 KiB until the proxy's
 * WINDOW_UPDATE reaches the origin. 6 MiB a stream and 15 MiB the connection are Chrome's; what
 * the proxy holds for a job that reads slowly is bounded by them (a paused stream is not
 * consumed, so its window is not given back).
 */
const H2_STREAM_WINDOW = 6 * 1024 * 1024;
const H2_SESSION_WINDOW = 15 * 1024 * 1024;

/** Kept-alive connections a session may hold free per destination, and how long an idle one is kept. */
export const POOLED_PER_DESTINATION = 4;
export const POOLED_IDLE_MS = 15_000;

/** Errors of a connection that never opened: said as "cannot connect", as for a tunnel. */
export const CONNECT_ERRORS = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET', 'EADDRNOTAVAIL']);

/** A request inside the TLS the proxy ended, and its answer: HTTP/1.1 or HTTP/2, as the job's client chose by ALPN. */
type JobRequest = IncomingMessage | Http2ServerRequest;
type JobResponse = ServerResponse | Http2ServerResponse;

/** How the proxy speaks to an origin, as its ALPN chose: one multiplexed HTTP/2 session, or HTTP/1.1 over the session's pool. */
type Origin = { kind: 'h2'; session: ClientHttp2Session } | { kind: 'h1' };

/**
 * The TLS the proxy ends for a credential's host (SPEC §21): a certificate its CA signs for the
 * host, and the requests inside served as HTTP/1.1, each judged, the credential written in, sent
 * on over TLS verified against the system's roots or upstreamCa, the answer scrubbed. Nothing
 * goes upstream before a request has been judged.
 */
export class Interceptor {
  /** Each session's TLS servers, one per credential host and port it reached (never listening: fed the job's streams). */
  private readonly servers = new WeakMap<InterceptClient, Map<string, Http2SecureServer>>();
  /** Each session's pool of verified HTTP/1.1 connections to its credentials' hosts. */
  private readonly tlsAgents = new WeakMap<InterceptClient, HttpsAgent>();
  /** Each session's way to each origin (host and port), learned from the origin's ALPN at the first request. */
  private readonly origins = new WeakMap<InterceptClient, Map<string, Promise<Origin>>>();

  /**
   * End the job's TLS on `socket` (its CONNECT already answered; `head`: what it sent after it)
   * with `leaf`, offering HTTP/2 and HTTP/1.1 by ALPN. The stream goes to a TLS server of the
   * proxy's own as a new connection, so the server reads the job's first bytes itself (handing
   * it a TLS socket after the handshake loses what the client sent right after).
   */
  serve(socket: Socket, head: Buffer, host: string, port: number, client: InterceptClient, leaf: { key: string; cert: string }): void {
    if (head.length > 0) socket.unshift(head);
    this.serverFor(client, host, port, leaf).emit('connection', socket);
  }

  private serverFor(client: InterceptClient, host: string, port: number, leaf: { key: string; cert: string }): Http2SecureServer {
    let mine = this.servers.get(client);
    if (!mine) this.servers.set(client, (mine = new Map()));
    const key = `${host}|${port}`;
    let server = mine.get(key);
    if (server) return server;
    server = createSecureServer({ key: leaf.key, cert: leaf.cert, allowHTTP1: true, ALPNProtocols: ['h2', 'http/1.1'] });
    server.on('request', (req: JobRequest, res: JobResponse) => void this.forward(req, res, client, host, port));
    // HTTP/1.1 connections only (a WebSocket): HTTP/2 has no Upgrade.
    server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket, head, client, host, port));
    // A CONNECT inside (RFC 8441's WebSocket over HTTP/2, or a tunnel in the tunnel): not offered (docs/credentials.md).
    server.on('connect', (req: JobRequest, res: Http2ServerResponse | Duplex) => {
      const text = `procctl proxy: CONNECT inside the TLS of a credential's host (a WebSocket over HTTP/2, RFC 8441, or a tunnel) is not supported; open the WebSocket over HTTP/1.1 (an Upgrade request), which is\n`;
      if (res instanceof Http2ServerResponse) return answer(res, 501, text);
      res.end(`HTTP/1.1 501 Not Implemented\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
    });
    server.on('tlsClientError', (err: Error, tls: TLSSocket) => {
      const alert = /alert ([a-z ]+)/i.exec(err.message)?.[1] ?? (err as NodeJS.ErrnoException).code ?? err.message;
      refuse(
        client,
        host,
        `${CREDENTIAL_TLS}: the job's client did not accept the certificate the proxy gives for ${host} (${alert}): it pins ${host}'s own certificate, or does not trust the bundle in $SSL_CERT_FILE; a credential can only be written in for clients that trust the proxy's CA`,
      );
      tls.destroy();
    });
    mine.set(key, server);
    return server;
  }

  /**
   * What every request inside the TLS the proxy ended goes through before anything is sent
   * (a WebSocket upgrade as well): the placeholders of other credentials refused, a withdrawn
   * credential refused, the host judged; then the headers for the upstream, the credential
   * written in and the placeholder replaced, and the path with it replaced too.
   */
  private async judge(
    req: JobRequest,
    client: InterceptClient,
    host: string,
  ): Promise<{ status: number; text: string } | { address: string; mine: readonly ProxyCredential[]; headers: Record<string, string | string[]>; path: string }> {
    const stray = strayPlaceholder(client, host, [req.url ?? '', ...req.rawHeaders]);
    if (stray) return { status: 403, text: `procctl proxy: ${refuse(client, host, stray).refused}\n` };
    const withdrawn = credentialsFor(client, host).find((c) => c.withdrawn !== undefined);
    if (withdrawn) return { status: 403, text: `procctl proxy: ${refuse(client, host, withdrawn.withdrawn!).refused}\n` };
    const to = await allowedAddress(host, client);
    if ('refused' in to) return { status: to.refused.startsWith('blocked ') ? 403 : 502, text: `procctl proxy: ${to.refused}\n` };
    const mine = credentialsFor(client, host);
    const headers: Record<string, string | string[]> = {};
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i].toLowerCase();
      // `TE: trailers` says the client takes trailers (gRPC's servers require it): passed on, as HTTP/2 allows; any other TE is this hop's.
      if (name === 'te') {
        if (req.rawHeaders[i + 1].split(',').some((t) => t.trim().toLowerCase() === 'trailers')) headers.te = 'trailers';
        continue;
      }
      // HTTP/2's pseudo-headers are said anew for the upstream (method, path, the authority asked for).
      if (HOP.has(name) || name.startsWith(':')) continue;
      const had = headers[name];
      const value = withValues(req.rawHeaders[i + 1], mine);
      headers[name] = had === undefined ? value : Array.isArray(had) ? [...had, value] : [had, value];
    }
    for (const c of mine) headers[c.header] = c.value;
    let path = req.url ?? '/';
    for (const c of mine) if (path.includes(c.placeholder)) path = path.split(c.placeholder).join(encodeURIComponent(c.value));
    return { address: to.address, mine, headers, path };
  }

  /** One request inside the TLS the proxy ended: judged, the credential written in, sent upstream over verified TLS, the answer scrubbed, trailers passed both ways. */
  private async forward(req: JobRequest, res: JobResponse, client: InterceptClient, host: string, port: number): Promise<void> {
    const judged = await this.judge(req, client, host);
    if ('status' in judged) return answer(res, judged.status, judged.text);
    const { mine, headers, path } = judged;
    const masks = mine.map((c) => ({ find: c.value, put: '*'.repeat(Buffer.byteLength(c.value)) }));
    // Set when the job's body carried another credential's placeholder: the upstream was cut, and its failure is not the job's answer.
    let cut = false;
    const failed = (err: Error) => {
      if (cut) return;
      const why = this.whyFailed(err, client, host, port, res.headersSent);
      if (!res.headersSent) answer(res, 502, `procctl proxy: ${why}\n`);
      else res.destroy();
    };
    // What the upstream says back never carries the value to the job: masked, at its own length (the body's length stays right).
    const respond = (status: number, message: string | undefined, pairs: [string, string][], body: Readable, trailers: () => IncomingHttpHeaders | undefined) => {
      if (cut) return;
      for (const c of mine) client.used?.(c.name, host);
      const scrub = new Scrubber(masks);
      const kept = pairs.filter(([name]) => !HOP.has(name.toLowerCase()) && !name.startsWith(':')).map(([name, value]): [string, string] => [name, scrub.text(value)]);
      if (res instanceof ServerResponse) res.writeHead(status, message, kept.flat());
      else res.writeHead(status, asHeaders(kept));
      relayScrubbed(body, res, new Scrubber(masks), () => trailersOf(trailers(), (v) => scrub.text(v)));
    };
    // The job's body: other credentials' placeholders looked for as it passes (the upstream is cut before one would reach it).
    const watch = new PlaceholderWatch(client.credentials?.filter((c) => !mine.includes(c)) ?? []);
    const stray = (stop: () => void) => (c: ProxyCredential) => {
      cut = true;
      stop();
      const why = refuse(client, host, `${CREDENTIAL_ELSEWHERE}: the request's body carries $PROCCTL_CRED_${c.name}, which is sent only to ${c.hosts.join(', ')}; the request was cut off before it reached ${host}`).refused;
      if (!res.headersSent) answer(res, 403, `procctl proxy: ${why}\n`);
      else res.destroy();
    };
    const jobTrailers = () => trailersOf(req.trailers, (v) => withValues(v, mine));
    let origin: Origin;
    try {
      origin = await this.originOf(client, host, port, judged.address);
    } catch (err) {
      return failed(err as Error);
    }
    if (origin.kind === 'h2') {
      // waitForTrailers: the job's trailers (if it sends any) go as the stream's last HEADERS; none: an empty end.
      const stream = origin.session.request({ ...headers, ':method': req.method, ':path': path, ':authority': authority(host, port), ':scheme': 'https' }, { waitForTrailers: true });
      let got: IncomingHttpHeaders | undefined;
      stream.on('trailers', (h) => (got = h));
      stream.on('wantTrailers', () => {
        try {
          stream.sendTrailers(jobTrailers() ?? {});
        } catch (err) {
          // A field HTTP/2 does not allow in trailers: the call cannot be completed as the job sent it.
          stream.destroy(err as Error);
        }
      });
      stream.on('response', (h) => respond(Number(h[':status']) || 502, undefined, pairsOf(h), stream, () => got));
      stream.on('error', failed);
      pumpBody(req, stream, watch, stray(() => stream.close(h2constants.NGHTTP2_CANCEL)), () => stream.end());
      return;
    }
    const upstream = httpsRequest(
      {
        agent: this.agentOf(client),
        host: judged.address,
        port,
        servername: isIP(host) ? undefined : host,
        method: req.method,
        path,
        // The host the tunnel was asked for, whatever Host the job wrote: a server that hosts many
        // names (a CDN) must not route the credential to another of its tenants (domain fronting).
        headers: { ...headers, host: authority(host, port) },
      },
      (r) => {
        const pairs: [string, string][] = [];
        for (let i = 0; i < r.rawHeaders.length; i += 2) pairs.push([r.rawHeaders[i], r.rawHeaders[i + 1]]);
        respond(r.statusCode ?? 502, r.statusMessage, pairs, r, () => r.trailers);
      },
    );
    upstream.on('error', failed);
    pumpBody(
      req,
      upstream,
      watch,
      stray(() => upstream.destroy()),
      () => {
        // Trailers go only in a chunked body (Node sends one when the request has no Content-Length).
        const t = jobTrailers();
        if (t) upstream.addTrailers(t);
        upstream.end();
      },
    );
  }

  /** What the job is told when the upstream failed: an untrusted certificate is a refusal of its own (counted). */
  private whyFailed(err: Error, client: InterceptClient, host: string, port: number, answered: boolean): string {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    if (UNTRUSTED.test(code) || /certificate|self.signed/i.test(err.message)) {
      return refuse(
        client,
        host,
        `${CREDENTIAL_UPSTREAM}: ${host}'s certificate is not trusted (${code || err.message}); the proxy sends a credential only to a host it has verified against the system's roots${client.upstreamCa ? ' and sandbox.network.upstreamCa' : ', or sandbox.network.upstreamCa (a PEM file) when the host is yours'}`,
      ).refused;
    }
    return CONNECT_ERRORS.has(code) && !answered ? `cannot connect to ${host}:${port} (${code})` : `${host}: ${err.message}`;
  }

  /**
   * A WebSocket (or any HTTP/1.1 `Upgrade`) inside the TLS the proxy ended: judged and written
   * as any request, sent on its own verified TLS connection speaking HTTP/1.1 (an upgrade is
   * HTTP/1.1's), and once the upstream answers 101 the two sides are joined both ways, what
   * the upstream sends masked as an answer's body is. Any other answer goes back as it came.
   */
  private async upgrade(req: IncomingMessage, socket: Duplex, head: Buffer, client: InterceptClient, host: string, port: number): Promise<void> {
    socket.on('error', () => socket.destroy());
    const plain = (status: number, text: string) => {
      if (!socket.destroyed) socket.end(`HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
    };
    const judged = await this.judge(req, client, host);
    if ('status' in judged) return plain(judged.status, judged.text);
    const { mine, headers, path } = judged;
    const masks = mine.map((c) => ({ find: c.value, put: '*'.repeat(Buffer.byteLength(c.value)) }));
    // A connection of its own (it becomes the WebSocket's), verified as every upstream one is, asking for HTTP/1.1 by ALPN.
    const connection = () =>
      tlsConnect({ host: judged.address, port, servername: isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'], ...(client.upstreamCa ? { ca: client.upstreamCa } : {}) });
    const upstream = httpsRequest({
      createConnection: connection,
      method: req.method,
      path,
      headers: { ...headers, host: authority(host, port), connection: 'Upgrade', upgrade: req.headers.upgrade ?? '' },
    });
    const said = (status: number, message: string, raw: string[], scrub: Scrubber) => {
      let text = `HTTP/1.1 ${status} ${message}\r\n`;
      for (let i = 0; i < raw.length; i += 2) text += `${raw[i]}: ${scrub.text(raw[i + 1])}\r\n`;
      return `${text}\r\n`;
    };
    upstream.on('upgrade', (r: IncomingMessage, up: Socket, upHead: Buffer) => {
      for (const c of mine) client.used?.(c.name, host);
      const release = client.hold?.({ close: () => up.destroy() }) ?? (() => undefined);
      const scrub = new Scrubber(masks);
      socket.write(said(r.statusCode ?? 101, r.statusMessage ?? 'Switching Protocols', r.rawHeaders, scrub));
      let closed = false;
      const close = () => {
        if (closed) return;
        closed = true;
        release();
        up.destroy();
        socket.destroy();
      };
      up.on('error', close).once('close', close);
      socket.on('error', close).once('close', close);
      if (head.length > 0) up.write(head);
      if (upHead.length > 0) socket.write(scrub.write(upHead));
      socket.pipe(up);
      up.pipe(new Transform({ transform: (chunk: Buffer, _e, done) => done(null, scrub.write(chunk)), flush: (done) => done(null, scrub.end()) })).pipe(socket);
    });
    upstream.on('response', (r: IncomingMessage) => {
      // Not upgraded (a refusal, a redirect): the answer as it came, masked, and the connection closed after it.
      for (const c of mine) client.used?.(c.name, host);
      const scrub = new Scrubber(masks);
      const kept: string[] = [];
      for (let i = 0; i < r.rawHeaders.length; i += 2) if (!HOP.has(r.rawHeaders[i].toLowerCase())) kept.push(r.rawHeaders[i], r.rawHeaders[i + 1]);
      socket.write(said(r.statusCode ?? 502, r.statusMessage ?? '', [...kept, 'connection', 'close'], scrub));
      r.on('data', (chunk: Buffer) => socket.write(scrub.write(chunk)));
      r.once('end', () => socket.end(scrub.end()));
      socket.once('close', () => r.destroy());
    });
    upstream.on('error', (err) => plain(502, `procctl proxy: ${this.whyFailed(err, client, host, port, false)}\n`));
    upstream.end();
  }

  /**
   * How to reach `host:port` for this session: the first request opens a TLS connection offering
   * HTTP/2 and HTTP/1.1 (verified as every upstream connection is); an origin that picks h2 keeps
   * that connection as one session all the session's requests share, one that picks HTTP/1.1 is
   * reached through the session's pool from then on. Forgotten when the HTTP/2 session ends or
   * the first connection fails, so the next request asks again.
   */
  private originOf(client: InterceptClient, host: string, port: number, address: string): Promise<Origin> {
    let mine = this.origins.get(client);
    if (!mine) this.origins.set(client, (mine = new Map()));
    const key = `${host}|${port}|${address}`;
    const known = mine.get(key);
    if (known) return known;
    const made = new Promise<Origin>((resolve, reject) => {
      const socket = tlsConnect({ host: address, port, servername: isIP(host) ? undefined : host, ALPNProtocols: ['h2', 'http/1.1'], ...(client.upstreamCa ? { ca: client.upstreamCa } : {}) });
      socket.once('error', reject);
      socket.once('secureConnect', () => {
        if (socket.alpnProtocol !== 'h2') {
          socket.destroy();
          return resolve({ kind: 'h1' });
        }
        socket.removeListener('error', reject);
        const session = http2Connect(`https://${authority(host, port)}`, { createConnection: () => socket, settings: { initialWindowSize: H2_STREAM_WINDOW } });
        // The whole connection's window too (HTTP/2's default is 64 KiB for it as for each stream).
        session.setLocalWindowSize(H2_SESSION_WINDOW);
        const forget = () => {
          if (mine.get(key) === made) mine.delete(key);
        };
        session.on('error', forget);
        session.once('close', forget);
        session.once('goaway', forget);
        // Idle, it does not keep the process up; it is closed with the session's other streams.
        session.unref();
        client.hold?.({ close: () => session.destroy() });
        resolve({ kind: 'h2', session });
      });
    });
    made.catch(() => {
      if (mine.get(key) === made) mine.delete(key);
    });
    mine.set(key, made);
    return made;
  }

  /** The session's pool of verified HTTP/1.1 connections to its credentials' hosts (kept as for plain HTTP). */
  private agentOf(client: InterceptClient): HttpsAgent {
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

/** An HTTP/2 answer's headers as name and value pairs (a list's values each its own). */
function pairsOf(h: IncomingHttpHeaders): [string, string][] {
  const out: [string, string][] = [];
  for (const [name, value] of Object.entries(h)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) out.push([name, String(v)]);
  }
  return out;
}

/** Pairs as a headers object (names lower case; a repeated name's values as a list). */
function asHeaders(pairs: [string, string][]): OutgoingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (const [n, v] of pairs) {
    const name = n.toLowerCase();
    const had = out[name];
    out[name] = had === undefined ? v : Array.isArray(had) ? [...had, v] : [had, v];
  }
  return out;
}

/** A header's value with the placeholders of `mine` (the credentials of the host it goes to) replaced by their values. */
function withValues(value: string, mine: readonly ProxyCredential[]): string {
  let out = value;
  for (const c of mine) if (out.includes(c.placeholder)) out = out.split(c.placeholder).join(c.value);
  return out;
}

/** Trailers to pass on (`grpc-status`, `grpc-message`, ...): each value through `map`, this hop's fields and pseudo-headers left out; undefined when none. */
function trailersOf(trailers: IncomingHttpHeaders | NodeJS.Dict<string | string[]> | undefined, map: (value: string) => string): OutgoingHttpHeaders | undefined {
  if (!trailers) return undefined;
  const out: OutgoingHttpHeaders = {};
  let any = false;
  for (const [name, value] of Object.entries(trailers)) {
    const n = name.toLowerCase();
    if (value === undefined || HOP.has(n) || n.startsWith(':') || n === 'content-length') continue;
    out[n] = Array.isArray(value) ? value.map((v) => map(String(v))) : map(String(value));
    any = true;
  }
  return any ? out : undefined;
}

/** Count a refusal on the session and say it as the proxy answers it. */
export function refuse(client: Pick<InterceptClient, 'denied'>, host: string, reason: string): { refused: string } {
  client.denied(host, reason);
  return { refused: `blocked ${host}: ${reason}` };
}

/** The address a stream to `host` may go to (the first of its addresses the policy allows), or why none may. */
export async function allowedAddress(host: string, client: Pick<InterceptClient, 'policy' | 'denied'>): Promise<{ name: string; address: string } | { refused: string }> {
  const name = host.replace(/^\[(.*)\]$/, '$1');
  const byName = refusedName(name, client.policy);
  if (byName) return refuse(client, name, byName);
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
  return refuse(client, name, why ?? `${name} has no address`);
}

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
export function credentialsFor(client: Pick<InterceptClient, 'credentials'>, host: string): readonly ProxyCredential[] {
  if (!client.credentials?.length) return [];
  const h = host.toLowerCase().replace(/\.$/, '');
  return client.credentials.filter((c) => c.hosts.some((p) => matches(h, p)));
}

/** Why a request to `host` is refused for carrying the placeholder of a credential not meant for it, or undefined. */
export function strayPlaceholder(client: Pick<InterceptClient, 'credentials'>, host: string, texts: readonly string[]): string | undefined {
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

/** Bytes gathered before a write goes out without waiting for the turn of the loop to end. */
const BATCH_BYTES = 256 * 1024;

/**
 * The upstream's answer body to the job, every byte through the Scrubber, written in batches:
 * what arrives in one turn of the loop (the 16 KiB records one read of the upstream decrypts
 * to) goes to the job as one write, encrypted and sent in one go, rather than a write, its
 * stream bookkeeping and a system call per record. Backpressure as a pipe's: the upstream is
 * paused while the job's side is full. Either side failing ends the other.
 */
function relayScrubbed(from: Readable, to: JobResponse, scrub: Scrubber, trailers?: () => OutgoingHttpHeaders | undefined): void {
  let batch: Buffer[] = [];
  let size = 0;
  let scheduled = false;
  const flush = () => {
    scheduled = false;
    if (size === 0 || to.destroyed) return;
    const data = batch.length === 1 ? batch[0] : Buffer.concat(batch, size);
    batch = [];
    size = 0;
    if (!(to as ServerResponse).write(data)) from.pause();
  };
  to.on('drain', () => from.resume());
  to.once('close', () => {
    if (!from.readableEnded) from.destroy();
  });
  from.on('data', (chunk: Buffer) => {
    const out = scrub.write(chunk);
    if (out.length === 0) return;
    batch.push(out);
    size += out.length;
    if (size >= BATCH_BYTES) flush();
    else if (!scheduled) {
      scheduled = true;
      setImmediate(flush);
    }
  });
  from.once('end', () => {
    flush();
    if (to.destroyed) return;
    // The upstream's trailers (gRPC's status) after the body; an HTTP/1.1 answer carries them when it is chunked.
    const t = trailers?.();
    if (t) to.addTrailers(t);
    to.end(scrub.end());
  });
  from.once('error', () => to.destroy());
}

export function answer(res: ServerResponse | Http2ServerResponse, status: number, text: string): void {
  // HTTP/2 has no Connection header: a refusal there ends its own stream only.
  res.writeHead(status, res instanceof ServerResponse ? { 'content-type': 'text/plain', connection: 'close' } : { 'content-type': 'text/plain' });
  res.end(text);
}
