import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { packageVersion } from '../base/version.js';
import { createMcpServer } from './server.js';
import { connectOrStart } from './start.js';
import { approverCredential } from '../rpc/credential.js';
import { DaemonClient } from '../rpc/client.js';
import { dialFor, hostOf } from '../remote/reach.js';

export interface ServeOptions {
  /** A daemon on another host (`ssh://…`, else $PROCCTL_HOST): reached over ssh, never started from here. */
  host?: string;
  socket?: string;
  scope?: string;
  token?: string;
  /** Fail instead of starting a daemon when none is reachable. */
  spawn: boolean;
  /** Where to say what happened (a daemon started, a connection lost): stderr, never stdout. */
  say: (line: string) => void;
}

/**
 * `procctl mcp`: an MCP server on stdin/stdout until the client closes it. The daemon is reached
 * at start (or started, unless `spawn` is false or it is on another host); one that cannot be
 * reached is said on stderr and the server serves anyway, each tool call saying why, and reaching
 * for it again on the next call, as after a lost connection.
 */
export async function serveMcp(opts: ServeOptions): Promise<void> {
  /** How many planned restarts the daemon had made when each connection was made (SPEC §19). */
  const plannedAt = new WeakMap<DaemonClient, number>();
  const planned = async (c: DaemonClient): Promise<number | undefined> => {
    const st = await c.call<{ restarts?: { planned?: number } }>('daemon.status').catch(() => undefined);
    return st?.restarts?.planned;
  };
  const connected = async (): Promise<DaemonClient> => {
    if (!opts.spawn || hostOf({ host: opts.host }) !== undefined) return DaemonClient.over(await dialFor({ host: opts.host, socket: opts.socket }));
    const r = await connectOrStart(opts.socket);
    if (r.started) opts.say(`procctl mcp: no daemon was running; started procctld (pid ${r.started.pid}, log ${r.started.log})`);
    return r.client;
  };
  const reach = async (): Promise<DaemonClient> => {
    const c = await connected();
    const n = await planned(c);
    if (n !== undefined) plannedAt.set(c, n);
    return c;
  };
  /** A connection that closed: was it a planned restart (the count grew since it was made)? */
  const restartedSince = async (c: DaemonClient): Promise<boolean> => {
    const before = plannedAt.get(c);
    if (before === undefined) return false;
    const now = await planned(await daemon());
    return now !== undefined && now > before;
  };
  // Unreachable at start, it still serves: initialize and tools/list answer, and each tool call says why (SPEC §13).
  let current: DaemonClient | undefined;
  let lost = false;
  try {
    current = await reach();
  } catch (err) {
    lost = true;
    opts.say(`procctl mcp: ${(err as Error).message}; serving anyway: each tool call says why until the daemon can be reached`);
  }
  /** The client closed stdin: the server is ending, and its own close of the daemon connection is no news. */
  let ending = false;
  let reconnecting: Promise<DaemonClient> | undefined;
  const watch = (c: DaemonClient) =>
    void c.closed.then((why) => {
      if (current !== c || ending) return;
      lost = true;
      opts.say(`procctl mcp: ${why.message}; reconnecting at the next call (a planned restart of the daemon closes every connection)`);
    });
  if (current) watch(current);
  const daemon = async (): Promise<DaemonClient> => {
    if (!lost && current) return current;
    reconnecting ??= reach().then(
      (c) => {
        current = c;
        lost = false;
        watch(c);
        reconnecting = undefined;
        return c;
      },
      (err) => {
        reconnecting = undefined;
        throw err;
      },
    );
    return reconnecting;
  };
  // A daemon on another host made its credential there: only $PROCCTL_APPROVER_TOKEN can reach it.
  const remote = hostOf({ host: opts.host }) !== undefined;
  const approverToken = () => (remote ? process.env.PROCCTL_APPROVER_TOKEN || undefined : approverCredential(opts.socket));
  const handle = serveStdio(() => createMcpServer(daemon, { scope: opts.scope, token: opts.token, version: packageVersion(), approverToken, reach: { host: opts.host, socket: opts.socket }, restartedSince }));
  await new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
  });
  ending = true;
  await handle.close();
  current?.close();
}
