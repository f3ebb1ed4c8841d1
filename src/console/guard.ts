import { randomBytes, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { OwnAddress } from './listen.js';

/**
 * The page's policy: its own files only, no inline script, nothing framed, nothing sent elsewhere.
 * Inline styles are allowed: the terminal emulator sizes its rows with them (a style cannot run code).
 */
export const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

/** Headers on every answer. */
export const SAFE_HEADERS: Record<string, string> = {
  'content-security-policy': CSP,
  'x-content-type-options': 'nosniff',
  'x-frame-options': 'DENY',
  'referrer-policy': 'no-referrer',
  'cross-origin-opener-policy': 'same-origin',
  'cross-origin-resource-policy': 'same-origin',
};

const secret = () => randomBytes(32).toString('base64url');

function same(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A browser that traded the token: its cookie's value and the CSRF token its page sends back. */
interface BrowserSession {
  csrf: string;
}

export type Refusal = { status: number; why: string };

/**
 * Who may use the console (SPEC §17): the one-time token printed at start is traded, once, for
 * an HttpOnly SameSite=Strict cookie; requests must name the console's own Host (DNS
 * rebinding), and state-changing ones must come from its own Origin with the session's CSRF
 * token. Nothing here is logged: neither the token nor a cookie leaves this object.
 */
export class Guard {
  private token: string | undefined = secret();
  private readonly sessions = new Map<string, BrowserSession>();
  /** The cookie's name carries the port: browsers share cookies between ports of one host. */
  readonly cookie: string;

  /**
   * `renewed`: a console run as a service keeps one unspent link (in its link file): each trade
   * mints the next token and hands its URL here. Without it, the printed token is the only one.
   */
  constructor(private readonly own: OwnAddress, cookieSuffix: string, private readonly renewed?: (url: string) => void) {
    this.cookie = `procctl_console_${cookieSuffix.replace(/[^A-Za-z0-9_]/g, '_')}`;
  }

  /** The URL to print, with the one-time token. */
  firstUrl(): string {
    if (this.token === undefined) throw new Error('the one-time token has been spent');
    return `${this.own.url}?token=${this.token}`;
  }

  /** Is the request addressed to the console itself (not to a name rebound to loopback)? */
  host(req: IncomingMessage): Refusal | undefined {
    const host = req.headers.host;
    if (host !== undefined && this.own.hosts.has(host.toLowerCase())) return undefined;
    return { status: 421, why: `this console answers to ${[...this.own.hosts].join(' or ')}, not to Host ${JSON.stringify(host ?? '')}` };
  }

  /**
   * Trade the one-time token for a browser session: the Set-Cookie value, or a refusal when the
   * token is wrong or spent.
   */
  trade(presented: string): { setCookie: string } | Refusal {
    if (this.token === undefined || !same(this.token, presented)) {
      // A console run as a service keeps an unspent link in its file: that is where the next one is.
      const next = this.renewed ? 'run `procctl ui --link` for a fresh link' : 'start procctl ui again for a new link';
      return { status: 403, why: `this link has been used or is not the one procctl ui printed: open the console in the browser that first used it, or ${next}` };
    }
    this.token = undefined;
    if (this.renewed) {
      this.token = secret();
      this.renewed(this.firstUrl());
    }
    const id = secret();
    this.sessions.set(id, { csrf: secret() });
    // No Max-Age: a session cookie, kept in the browser's memory and gone when it closes.
    return { setCookie: `${this.cookie}=${id}; Path=/; HttpOnly; SameSite=Strict` };
  }

  /** The browser session a request's cookie names, if any. */
  session(req: IncomingMessage): BrowserSession | undefined {
    const id = cookieValue(req.headers.cookie, this.cookie);
    return id === undefined ? undefined : this.sessions.get(id);
  }

  /** May this request change something: the console's Origin, its session's cookie and CSRF token, JSON? */
  change(req: IncomingMessage): Refusal | undefined {
    const origin = req.headers.origin;
    if (origin === undefined || !this.own.origins.has(origin)) {
      return { status: 403, why: `a change must come from the console's own page (Origin ${[...this.own.origins][0]}), not from ${origin ?? 'a request without an Origin'}` };
    }
    const s = this.session(req);
    if (!s) return { status: 401, why: 'no console session: open the link procctl ui printed' };
    const csrf = req.headers['x-csrf-token'];
    if (typeof csrf !== 'string' || !same(csrf, s.csrf)) return { status: 403, why: 'the CSRF token is missing or wrong: reload the console' };
    if (!/^application\/json\b/.test(req.headers['content-type'] ?? '')) return { status: 415, why: 'a change is sent as application/json' };
    return undefined;
  }
}

function cookieValue(header: string | undefined, name: string): string | undefined {
  if (!header) return undefined;
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim();
  }
  return undefined;
}

/** Answer with a refusal: plain text, never an echo of what was sent as HTML. */
export function refuse(res: ServerResponse, r: Refusal): void {
  res.writeHead(r.status, { ...SAFE_HEADERS, 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' });
  res.end(`${r.why}\n`);
}
