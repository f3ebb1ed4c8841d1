import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { RpcCallError } from '../rpc/client.js';
import type { Asset } from './assets.js';
import { Guard, refuse, SAFE_HEADERS } from './guard.js';
import type { Fleet } from './fleet.js';
import type { DaemonLink } from './live.js';

/** What the page may ask the daemon to do to a session, through `POST /api/act`. */
const ACTIONS = new Set(['write', 'send-keys', 'submit', 'paste', 'resume', 'kill', 'pause', 'continue', 'apply', 'discard', 'undo']);
/** What it may read, through `GET /api/read`: a page of output, held changes and their diff. */
const READS = new Set(['log', 'changes']);
/** The filters of `GET /api/history` passed on as text (the daemon checks them: history's own schema). */
const HISTORY_TEXT = ['since', 'until', 'ofScope', 'status', 'grep', 'sessionId'];
/** Answers to approvals are the person's: these carry the approver credential. */
const ANSWERS = new Set(['resume']);
/** A request body larger than this is refused (a paste of a screenful is far smaller). */
const MAX_BODY = 256 * 1024;
/** A comment line keeps idle streams open through proxies. */
const KEEPALIVE_MS = 15_000;

/** The daemon's error kinds as HTTP statuses, so the page and a reader of the network log see what happened. */
const STATUS_OF: Record<string, number> = { invalid: 400, forbidden: 403, not_found: 404, conflict: 409, limit: 429, unavailable: 503 };

function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { ...SAFE_HEADERS, 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store' });
  res.end(JSON.stringify(body));
}

async function readBody(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY) throw Object.assign(new Error(`the request body is over ${MAX_BODY} bytes`), { status: 413 });
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    throw Object.assign(new Error('the request body is not JSON'), { status: 400 });
  }
}

/** A daemon's refusal goes to the page as its message and kind; anything else as unavailable. */
function failure(res: ServerResponse, err: unknown): void {
  // An answer already begun (a stream) cannot become an error: it ends.
  if (res.headersSent) return void res.destroy();
  const status = (err as { status?: number }).status;
  if (status) return json(res, status, { error: (err as Error).message });
  if (err instanceof RpcCallError || (err instanceof Error && err.name === 'RpcCallError')) {
    const e = err as RpcCallError;
    return json(res, STATUS_OF[String(e.kind)] ?? 400, { error: e.message, kind: e.kind });
  }
  json(res, 502, { error: err instanceof Error ? err.message : String(err), kind: 'unavailable' });
}

/**
 * The console's HTTP server (Node's own http): the page's files, the token trade, one stream of
 * pushes per open page (server-sent events), and the few calls the page makes, each passed to the
 * daemon as the operator. It holds no state of the daemon's but what DaemonLink keeps to push.
 */
export function consoleServer(guardOf: () => Guard, fleet: Fleet, assets: Map<string, Asset>): Server {
  const server = createServer((req, res) => {
    handle(req, res).catch((err) => failure(res, err));
  });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const guard = guardOf();
    const badHost = guard.host(req);
    if (badHost) return refuse(res, badHost);
    const url = new URL(req.url ?? '/', 'http://console');
    const path = url.pathname;
    if (req.method === 'GET' && path === '/') {
      const token = url.searchParams.get('token');
      if (token !== null) {
        // A browser that has its cookie already (a reload of the first link) just goes on.
        if (guard.session(req)) return redirect(res, '/');
        const traded = guard.trade(token);
        if ('status' in traded) return refuse(res, traded);
        // Off the address bar and out of the history at once.
        res.writeHead(303, { ...SAFE_HEADERS, location: '/', 'set-cookie': traded.setCookie, 'cache-control': 'no-store' });
        return void res.end();
      }
      if (!guard.session(req)) return refuse(res, { status: 401, why: 'open the console with the link procctl ui printed (it carries a one-time token)' });
      return asset(req, res, 'index.html');
    }
    if (req.method === 'GET' && (path === '/app.js' || path === '/app.css')) return asset(req, res, path.slice(1));
    if (!path.startsWith('/api/')) return refuse(res, { status: 404, why: `nothing at ${path}` });

    const session = guard.session(req);
    if (!session) return json(res, 401, { error: 'no console session: open the link procctl ui printed' });
    if (req.method === 'GET') {
      if (path === '/api/session') return json(res, 200, { csrf: session.csrf, hosts: fleet.names });
      const host = url.searchParams.get('host') ?? undefined;
      const sessionId = url.searchParams.get('session') ?? undefined;
      // The whole view's stream is every host's; anything else is of one host: the one named, or the only one.
      if (path === '/api/events' && sessionId === undefined && host === undefined) return stream(req, res, undefined, undefined);
      const link = fleet.link(host);
      if (typeof link === 'string') return json(res, 400, { error: link });
      if (path === '/api/events') return stream(req, res, sessionId, link);
      if (path === '/api/read') {
        const action = url.searchParams.get('action') ?? '';
        const sessionId = url.searchParams.get('sessionId') ?? '';
        if (!READS.has(action)) return json(res, 400, { error: `action must be one of ${[...READS].join(', ')}` });
        const params: Record<string, unknown> = { action, sessionId };
        for (const k of ['offset', 'limit']) {
          const v = url.searchParams.get(k);
          if (v !== null && /^\d+$/.test(v)) params[k] = Number(v);
        }
        return json(res, 200, await link.call('process', params));
      }
      if (path === '/api/history') {
        // The daemon's audit trail (SPEC §18), as the operator: every scope's, narrowed by what the page asks.
        const params: Record<string, unknown> = {};
        for (const k of HISTORY_TEXT) {
          const v = url.searchParams.get(k);
          if (v !== null && v !== '') params[k] = v;
        }
        for (const k of ['offset', 'limit']) {
          const v = url.searchParams.get(k);
          if (v !== null && /^\d{1,6}$/.test(v)) params[k] = Number(v);
        }
        return json(res, 200, await link.call('history', params));
      }
      if (path === '/api/policy') {
        // How an approval's command is judged, in its own scope: the parts and the rule that decided each.
        const command = url.searchParams.get('command') ?? '';
        const scope = url.searchParams.get('scope') ?? 'default';
        return json(res, 200, await link.callIn(scope, 'policy.check', { command }).catch((err) => ({ error: err instanceof Error ? err.message : String(err) })));
      }
      return json(res, 404, { error: `nothing at ${path}` });
    }
    if (req.method !== 'POST') return json(res, 405, { error: `${req.method} is not answered here` });
    const refusal = guard.change(req);
    if (refusal) return json(res, refusal.status, { error: refusal.why });
    if (path !== '/api/act') return json(res, 404, { error: `nothing at ${path}` });
    const body = await readBody(req);
    if (typeof body !== 'object' || body === null || Array.isArray(body)) return json(res, 400, { error: 'the body is a JSON object: {action, sessionId, ...}' });
    const { action, host, ...params } = body as Record<string, unknown>;
    const link = fleet.link(host);
    if (typeof link === 'string') return json(res, 400, { error: link });
    if (typeof action !== 'string' || !ACTIONS.has(action)) return json(res, 400, { error: `action must be one of ${[...ACTIONS].join(', ')}` });
    if (typeof params.sessionId !== 'string' || params.sessionId === '') return json(res, 400, { error: 'sessionId is required: the page acts on one session at a time' });
    // The page cannot name a scope or a credential, nor act on every session at once: the console's own are added, after what it sent.
    for (const k of ['scope', 'token', 'approverToken', 'all']) delete params[k];
    return json(res, 200, await link.call('process', { ...params, action }, ANSWERS.has(action)));
  }

  function redirect(res: ServerResponse, to: string): void {
    res.writeHead(303, { ...SAFE_HEADERS, location: to, 'cache-control': 'no-store' });
    res.end();
  }

  function asset(req: IncomingMessage, res: ServerResponse, name: string): void {
    const a = assets.get(name);
    if (!a) return refuse(res, { status: 404, why: `nothing at /${name}` });
    const gzip = /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''));
    res.writeHead(200, {
      ...SAFE_HEADERS,
      'content-type': a.type,
      'cache-control': 'no-cache',
      vary: 'accept-encoding',
      ...(gzip ? { 'content-encoding': 'gzip' } : {}),
    });
    res.end(gzip ? a.gzip : a.body);
  }

  /** One page's pushes as server-sent events, until it closes. */
  function stream(req: IncomingMessage, res: ServerResponse, sessionId: string | undefined, host: DaemonLink | undefined): void {
    res.writeHead(200, { ...SAFE_HEADERS, 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-store', connection: 'keep-alive' });
    res.write(': procctl console\n\n');
    const leave = fleet.add(
      {
        sessionId,
        send: (event, data) => {
          // Each host says bye as the console ends: the first one ends the stream.
          if (res.destroyed || res.writableEnded) return;
          res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
          if (event === 'bye') res.end();
        },
      },
      host,
    );
    const keepalive = setInterval(() => res.writableEnded || res.write(': keepalive\n\n'), KEEPALIVE_MS);
    req.on('close', () => {
      clearInterval(keepalive);
      leave();
    });
  }

  return server;
}
