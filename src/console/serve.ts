import { spawn } from 'node:child_process';
import { chmodSync, existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { DaemonClient } from '../rpc/client.js';
import { dialFor } from '../remote/reach.js';
import { loadAssets } from './assets.js';
import { Guard } from './guard.js';
import { consoleServer } from './http.js';
import { listenTarget, ownAddress } from './listen.js';
import { Fleet, hostAccess, parseHosts, singleHost } from './fleet.js';
import { DaemonLink, OperatorRefused } from './live.js';
import { linkFilePath, removeLinkFile, writeLinkFile } from './link-file.js';

// `procctl ui --link` reads the service's link file through this entry point.
export { linkFilePath, readLinkFile } from './link-file.js';

/** The CLI checks `ui --host` values before anything starts (a bad one is a usage error). */
export { parseHosts } from './fleet.js';

export interface ConsoleOptions {
  /** The global `--host ssh://…` (or $PROCCTL_HOST): the one daemon, when `hosts` names none. */
  host?: string;
  /** `procctl ui --host V` (repeatable): the fleet, each `local` or `ssh://…`, optionally `NAME=` in front. */
  hosts?: string[];
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
  const many = (o.hosts?.length ?? 0) > 0;
  const specs = many ? parseHosts(o.hosts!) : [singleHost(o.host, env)];
  const links = specs.map((spec) => {
    const { dial, credentials, fix } = hostAccess(spec, { socket: o.socket, adminToken: o.adminToken, env, fleet: many });
    return { spec, credentials, fix, link: new DaemonLink(spec.name, dial, credentials, fix) };
  });
  if (!many) {
    const { link, credentials, fix } = links[0];
    const { adminToken, approverToken } = credentials();
    if (!adminToken && !approverToken) {
      // No daemon is the likelier cause (its credential is made when it starts): say that first.
      (await DaemonClient.over(await dialFor({ host: o.host, socket: o.socket, env }))).close();
      throw new Error(`procctl ui acts as the operator and answers approvals as you: ${fix}`);
    }
    try {
      await link.start();
    } catch (err) {
      link.close();
      throw err;
    }
  } else {
    // Several hosts: one that cannot be reached now, or that refuses the console as the operator,
    // is shown so (with why, and what to set) and tried again; none reached is an error.
    const started = await Promise.allSettled(links.map(({ link }) => link.start()));
    if (started.every((r) => r.status === 'rejected')) {
      for (const { link } of links) link.close();
      throw (started[0] as PromiseRejectedResult).reason;
    }
    started.forEach((r, i) => {
      if (r.status === 'fulfilled') return;
      const why = r.reason instanceof Error ? r.reason : new Error(String(r.reason));
      const shown = why instanceof OperatorRefused ? 'shown as refused' : 'shown as disconnected';
      o.say(`procctl ui: host ${links[i].spec.name}: ${why.message}; it is ${shown} and tried again`);
      links[i].link.startLater(why);
    });
  }
  const fleet = new Fleet(links.map((l) => l.link));

  let guard: Guard | undefined;
  const server = consoleServer(() => guard!, fleet, assets);
  const where = target.where;
  if ('path' in where && existsSync(where.path)) {
    fleet.close();
    throw new Error(`--listen ${where.path} exists already: remove it if no console listens there, or name another path`);
  }
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    if ('path' in where) server.listen(where.path, resolve);
    else server.listen(where.port, where.host, resolve);
  }).catch((err: NodeJS.ErrnoException) => {
    fleet.close();
    const at = 'path' in where ? where.path : `${where.host}:${where.port}`;
    throw new Error(`cannot listen on ${at}: ${err.code === 'EADDRINUSE' ? 'something listens there already; pass another --port, or none for a free one' : err.message}`);
  });
  // Only the person's own user may connect to a socket path (a proxy runs as them or is given it).
  if ('path' in where) chmodSync(where.path, 0o600);
  const port = 'path' in where ? 0 : (server.address() as AddressInfo).port;
  const own = ownAddress(target, port, o.url);
  const linkFile = o.service ? (o.linkFile ?? linkFilePath(o.socket, many ? undefined : o.host, env)) : undefined;
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
      fleet.close();
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
  fleet.close();
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
