import { spawn } from 'node:child_process';
import { chmodSync, existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { approverCredential } from '../rpc/credential.js';
import { DaemonClient, RpcCallError } from '../rpc/client.js';
import { dialFor } from '../remote/reach.js';
import { resolveSocketPath } from '../config/paths.js';
import { loadAssets } from './assets.js';
import { Guard } from './guard.js';
import { consoleServer } from './http.js';
import { listenTarget, ownAddress } from './listen.js';
import { DaemonLink } from './live.js';
import { linkFilePath, removeLinkFile, writeLinkFile } from './link-file.js';

// `procctl ui --link` reads the service's link file through this entry point.
export { linkFilePath, readLinkFile } from './link-file.js';

export interface ConsoleOptions {
  host?: string;
  socket?: string;
  /** `--port N` (TCP; 0 or unset: a free one). */
  port?: number;
  /** `--listen ADDR|PATH`: a loopback address, or a Unix socket path for a reverse proxy. */
  listen?: string;
  /** `--url URL`: with a Unix socket, the address the person opens through the proxy. */
  url?: string;
  /** `--open`: start the person's browser on the link. */
  open?: boolean;
  /**
   * `--service`: run under systemd. The link goes to `linkFile` (0600), renewed after each use,
   * never to stdout or stderr (the journal, which others may read).
   */
  service?: boolean;
  /** `--link-file PATH`: where the service keeps its link (default: ui.url beside the socket). */
  linkFile?: string;
  /** The adminToken given on the command line (`--scope '*' --token T`). */
  adminToken?: string;
  env?: NodeJS.ProcessEnv;
  /** The one line for stdout: the link. */
  print(line: string): void;
  /** Everything else, for stderr. */
  say(text: string): void;
}

/**
 * `procctl ui` (SPEC §17): connect to the daemon as the operator, serve the console, print its
 * link with a one-time token, and serve until SIGINT or SIGTERM.
 */
export async function serveConsole(o: ConsoleOptions): Promise<void> {
  const env = o.env ?? process.env;
  const target = listenTarget(o.listen, o.port);
  const assets = loadAssets();
  const credentials = () => ({ adminToken: o.adminToken ?? (env.PROCCTL_ADMIN_TOKEN || undefined), approverToken: approverCredential(o.socket, env) });
  const { adminToken, approverToken } = credentials();
  if (!adminToken && !approverToken) {
    // No daemon is the likelier cause (its credential is made when it starts): say that first.
    (await DaemonClient.over(await dialFor({ host: o.host, socket: o.socket, env }))).close();
    const beside = o.host ? 'set $PROCCTL_APPROVER_TOKEN to the daemon\'s approver credential' : `run it as the user who can read ${resolveSocketPath(o.socket, env)}.approver`;
    throw new Error(`procctl ui acts as the operator and answers approvals as you: set $PROCCTL_ADMIN_TOKEN to the daemon's adminToken, or ${beside}`);
  }
  const link = new DaemonLink(() => dialFor({ host: o.host, socket: o.socket, env }), credentials);
  try {
    await link.start();
  } catch (err) {
    link.close();
    if ((err instanceof RpcCallError || (err instanceof Error && err.name === 'RpcCallError')) && (err as RpcCallError).kind === 'forbidden') {
      throw new Error(`the daemon does not take the console as the operator: ${(err as Error).message}. Set $PROCCTL_ADMIN_TOKEN to its adminToken`);
    }
    throw err;
  }

  let guard: Guard | undefined;
  const server = consoleServer(() => guard!, link, assets);
  const where = target.where;
  if ('path' in where && existsSync(where.path)) {
    link.close();
    throw new Error(`--listen ${where.path} exists already: remove it if no console listens there, or name another path`);
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if ('path' in where) server.listen(where.path, resolve);
    else server.listen(where.port, where.host, resolve);
  }).catch((err: NodeJS.ErrnoException) => {
    link.close();
    const at = 'path' in where ? where.path : `${where.host}:${where.port}`;
    throw new Error(`cannot listen on ${at}: ${err.code === 'EADDRINUSE' ? 'something listens there already; pass another --port, or none for a free one' : err.message}`);
  });
  // Only the person's own user may connect to a socket path (a proxy runs as them or is given it).
  if ('path' in where) chmodSync(where.path, 0o600);
  const port = 'path' in where ? 0 : (server.address() as AddressInfo).port;
  const own = ownAddress(target, port, o.url);
  const linkFile = o.service ? (o.linkFile ?? linkFilePath(o.socket, o.host, env)) : undefined;
  const renewed = linkFile
    ? (url: string) => {
        try {
          writeLinkFile(linkFile, url);
        } catch (err) {
          o.say(`procctl ui: could not write the next link to ${linkFile}: ${(err as Error).message}`);
        }
      }
    : undefined;
  guard = new Guard(own, 'path' in where ? 'sock' : String(port), renewed);
  const link1 = guard.firstUrl();
  if (linkFile) {
    try {
      writeLinkFile(linkFile, link1);
    } catch (err) {
      link.close();
      server.close();
      throw err;
    }
    // The address only: the token stays in the file.
    o.print(`serving ${own.url} ; \`procctl ui --link\` prints a link to open it (from ${linkFile})`);
  } else {
    o.print(link1);
    if (o.open) openBrowser(link1, o.say);
  }

  await new Promise<void>((resolve) => {
    const stop = () => {
      process.off('SIGINT', stop);
      process.off('SIGTERM', stop);
      resolve();
    };
    process.on('SIGINT', stop);
    process.on('SIGTERM', stop);
  });
  if (linkFile) removeLinkFile(linkFile);
  link.close();
  server.closeAllConnections();
  await new Promise<void>((resolve) => server.close(() => resolve()));
}

/** Start the person's browser on the link (`xdg-open`, or `open` on macOS); say so if it cannot, never the link itself. */
export function openBrowser(url: string, say: (text: string) => void): void {
  const opener = process.platform === 'darwin' ? 'open' : 'xdg-open';
  const child = spawn(opener, [url], { detached: true, stdio: 'ignore' });
  child.on('error', () => say(`procctl ui: could not start a browser with ${opener}; open the link above yourself`));
  child.unref();
}
