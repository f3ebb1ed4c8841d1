import { isIP } from 'node:net';

/** Where the console listens, and the address the person's browser uses for it. */
export interface ListenTarget {
  /** A TCP address on loopback, or a Unix socket path (for a reverse proxy). */
  where: { host: string; port: number } | { path: string };
}

/** The console's own address once it listens: what `Host` must name and what `Origin` must be. */
export interface OwnAddress {
  /** The `Host` values the console answers (DNS rebinding: any other is refused). */
  hosts: Set<string>;
  /** The origins a state-changing request may come from: `http://` and one of `hosts`. */
  origins: Set<string>;
  /** The URL printed for the person, without the token. */
  url: string;
}

const LOOPBACK_V4 = /^127(\.\d{1,3}){3}$/;

/**
 * `--listen ADDR|PATH` and `--port N` (SPEC §17): loopback only. A path (anything with a `/`)
 * is a Unix socket; an address must be a loopback IP, since the console acts as the operator
 * and nothing but the person's own browser should reach it.
 */
export function listenTarget(listen: string | undefined, port: number | undefined): ListenTarget {
  if (listen !== undefined && listen.includes('/')) {
    if (port !== undefined) throw new Error(`--port goes with a TCP address, not with the Unix socket ${listen}; drop one of them`);
    return { where: { path: listen } };
  }
  const host = listen ?? '127.0.0.1';
  if (isIP(host) === 0) throw new Error(`--listen takes a loopback IP address (127.0.0.1, ::1) or a Unix socket path, not "${host}"`);
  if (!(LOOPBACK_V4.test(host) || host === '::1')) {
    throw new Error(`--listen ${host} is not a loopback address: the console acts as the operator, so it listens on loopback only (127.0.0.1, ::1) or on a Unix socket path a reverse proxy forwards to`);
  }
  return { where: { host, port: port ?? 0 } };
}

/**
 * The console's own address. On TCP: the address and port it got (`localhost:PORT` too, which
 * browsers resolve to loopback themselves). On a Unix socket: the proxy's public URL (`--url`),
 * else `http://localhost`.
 */
export function ownAddress(target: ListenTarget, port: number, publicUrl?: string): OwnAddress {
  if ('path' in target.where) {
    const u = new URL(publicUrl ?? 'http://localhost');
    return { hosts: new Set([u.host]), origins: new Set([u.origin]), url: `${u.origin}/` };
  }
  const { host } = target.where;
  const named = host.includes(':') ? `[${host}]` : host;
  const hosts = new Set([`${named}:${port}`, `localhost:${port}`]);
  return { hosts, origins: new Set([...hosts].map((h) => `http://${h}`)), url: `http://${named}:${port}/` };
}
