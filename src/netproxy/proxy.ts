import { Agent, createServer as createHttpServer, request as httpRequest, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { ProxyCa } from './ca.js';
import { PlaceholderWatch, PREJUDGED_BODY_BYTES, pumpBody, readSmallBody } from './body-watch.js';
import {
  allowedAddress,
  answer,
  CONNECT_ERRORS,
  CREDENTIAL_ELSEWHERE,
  CREDENTIAL_PLAIN,
  credentialsFor,
  Interceptor,
  POOLED_IDLE_MS,
  POOLED_PER_DESTINATION,
  refuse,
  strayPlaceholder,
  type InterceptClient,
  type ProxyCredential,
} from './intercept.js';
import type { ByName } from './policy.js';
import { socks5 } from './socks5.js';
import { canHandOff, handOff, splice, type Hold } from './splice.js';
import { TlsThread } from './tls-thread.js';

export { CREDENTIAL_ELSEWHERE, type ProxyCredential } from './intercept.js';

/** Who a proxied stream belongs to: the session's policy, and where its refusals are counted. */
export interface ProxyClient extends InterceptClient {
  policy: ByName;
  /** A destination was refused, and why (counted on the session, told in its text and an event). */
  denied(host: string, reason: string): void;
  /** Count a tunnel the kernel relays with the session, which closes it at its end. */
  hold?: Hold;
}

const CLIENT = Symbol('procctl.proxyClient');
type Tagged = Socket & { [CLIENT]?: ProxyClient };

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
  /** The TLS the proxy ends for a credential's host (SPEC §21): on its own thread when it can be, else here. */
  private readonly thread = TlsThread.available() ? new TlsThread() : undefined;
  private readonly interceptor = new Interceptor();
  /** Each session's kept-alive connections for plain HTTP, closed with its other streams at its end. */
  private readonly agents = new WeakMap<ProxyClient, Agent>();

  /** `ca`: the daemon's CA, for the credentials' hosts (made at the daemon's start when the config has credentials). */
  constructor(private readonly ca: () => ProxyCa | undefined = () => undefined) {
    this.http.on('request', (req, res) => void this.forward(req, res));
    this.http.on('connect', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.tunnel(req, socket as Socket, head));
    this.http.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => void this.upgrade(req, socket as Socket, head));
    this.http.on('clientError', (_err, socket) => socket.destroy());
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
  private allowed(host: string, client: ProxyClient): Promise<{ name: string; address: string } | { refused: string }> {
    return allowedAddress(host, client);
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
    return refuse(client, host, reason);
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
    // The body is looked at for the credentials' placeholders (none of them is for this host: those were refused above).
    const watch = new PlaceholderWatch(client.credentials ?? []);
    const elsewhere = (c: ProxyCredential, what: string) =>
      `${CREDENTIAL_ELSEWHERE}: the request's body carries $PROCCTL_CRED_${c.name}, which is sent only to ${c.hosts.join(', ')}; ${what}`;
    let body: Buffer | undefined;
    const length = Number(req.headers['content-length']);
    if (!watch.empty && req.headers['transfer-encoding'] === undefined && Number.isInteger(length) && length <= PREJUDGED_BODY_BYTES) {
      // A small body (an API call's) is judged whole before anything is sent.
      try {
        body = await readSmallBody(req);
      } catch (err) {
        return answer(res, 400, `procctl proxy: ${(err as Error).message}\n`);
      }
      const seen = watch.write(body);
      if (!Buffer.isBuffer(seen)) return answer(res, 403, `procctl proxy: ${this.refuse(client, url.hostname, elsewhere(seen.found, `nothing was sent to ${url.hostname}`)).refused}\n`);
    }
    const headers = { ...req.headers };
    for (const h of ['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive']) delete headers[h];
    let cut = false;
    const upstream = httpRequest({ agent: this.agentOf(client), host: to.address, port, method: req.method, path: `${url.pathname}${url.search}`, headers: { ...headers, host: url.host } }, (r) => {
      if (cut) return;
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res, { end: false });
      r.once('end', () => {
        // Trailers come after a chunked body; passed on as they came.
        if (Object.keys(r.trailers).length > 0) res.addTrailers(r.trailers);
        res.end();
      });
    });
    upstream.on('error', (err) => {
      if (cut) return;
      const code = (err as NodeJS.ErrnoException).code;
      const why = code && CONNECT_ERRORS.has(code) && !res.headersSent ? `cannot connect to ${to.name}:${port} (${code})` : `${url.host}: ${err.message}`;
      if (!res.headersSent) answer(res, 502, `procctl proxy: ${why}\n`);
      else res.destroy();
    });
    if (body !== undefined) return void upstream.end(body);
    // A larger or chunked body is streamed; one carrying a placeholder is cut off before the placeholder leaves.
    const strayInBody = (c: ProxyCredential) => {
      cut = true;
      upstream.destroy();
      const why = this.refuse(client, url.hostname, elsewhere(c, `the request was cut off before it reached ${url.hostname}`)).refused;
      if (!res.headersSent) answer(res, 403, `procctl proxy: ${why}\n`);
      else res.destroy();
    };
    pumpBody(req, upstream, watch, strayInBody, () => {
      if (Object.keys(req.trailers).length > 0) upstream.addTrailers(req.trailers);
      upstream.end();
    });
  }

  /**
   * An HTTP/1.1 Upgrade to a plain http:// URL (a ws:// WebSocket): judged as a plain request is
   * (the placeholders in its line and headers, a credential's host refused, the policy), then
   * sent to the host and the two sides joined as a tunnel's are, the host's 101 and all after it
   * passed as they come.
   */
  private async upgrade(req: IncomingMessage, socket: Socket, head: Buffer): Promise<void> {
    const client = (socket as Tagged)[CLIENT];
    const plain = (status: string, text: string) => socket.end(`HTTP/1.1 ${status}\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`);
    let url: URL | undefined;
    try {
      url = new URL(req.url ?? '');
    } catch {
      url = undefined;
    }
    if (!client || url?.protocol !== 'http:') return void plain('400 Bad Request', 'procctl proxy: an Upgrade through the proxy takes an absolute http:// URL (ws://); wss:// goes through CONNECT\n');
    const stray = strayPlaceholder(client, url.hostname, [req.url ?? '', ...req.rawHeaders]);
    if (stray) return void plain('403 Forbidden', `procctl proxy: ${this.refuse(client, url.hostname, stray).refused}\n`);
    const mine = credentialsFor(client, url.hostname);
    if (mine.length > 0) {
      const why = `${CREDENTIAL_PLAIN}: the proxy writes credential ${mine.map((c) => c.name).join(', ')} only into requests it sends over TLS it has verified; use wss://${url.host}${url.pathname}`;
      return void plain('403 Forbidden', `procctl proxy: ${this.refuse(client, url.hostname, why).refused}\n`);
    }
    const up = await this.open(url.hostname, Number(url.port || 80), client);
    if ('refused' in up) return void plain(up.refused.startsWith('blocked ') ? '403 Forbidden' : '502 Bad Gateway', `procctl proxy: ${up.refused}\n`);
    let text = `${req.method} ${url.pathname}${url.search} HTTP/1.1\r\nhost: ${url.host}\r\n`;
    for (let i = 0; i < req.rawHeaders.length; i += 2) {
      const name = req.rawHeaders[i].toLowerCase();
      if (name !== 'host' && !name.startsWith('proxy-')) text += `${req.rawHeaders[i]}: ${req.rawHeaders[i + 1]}\r\n`;
    }
    up.write(`${text}\r\n`);
    if (head.length > 0) up.write(head);
    splice(socket, up, client.hold);
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
   * A credential's host (SPEC §21): the proxy ends the job's TLS itself (intercept.ts), with a
   * certificate its CA signs for the host. The stream is handed to the proxy's TLS thread
   * (tls-thread.ts) once its CONNECT is answered, so that decrypting, scrubbing and encrypting a
   * download does not hold up the daemon; served here where it cannot be handed over.
   */
  private intercept(socket: Socket, head: Buffer, host: string, port: number, client: ProxyClient): void {
    const ca = this.ca();
    if (!ca) {
      socket.end('HTTP/1.1 502 Bad Gateway\r\ncontent-type: text/plain\r\nconnection: close\r\n\r\nprocctl proxy: the daemon has no CA to end TLS with for this credential host (its state directory was not writable at start?)\n');
      return;
    }
    socket.write('HTTP/1.1 200 Connection Established\r\n\r\n');
    const thread = this.thread;
    if (!thread || !canHandOff(socket)) {
      this.interceptor.serve(socket, head, host, port, client, ca.leafFor(host));
      return;
    }
    const leaf = ca.leafFor(host);
    void handOff(socket).then((taken) => {
      if (taken) thread.serve(taken.fd, Buffer.concat([head, taken.unread]), host, port, client, leaf);
    });
  }
}

