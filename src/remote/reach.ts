import { resolveSocketPath } from '../config/paths.js';
import { channelDial, channelDescriptor } from '../transport/channel.js';
import { socketDial, type Dial } from '../transport/dial.js';

/** Which daemon a front door (the CLI, the MCP server) talks to. */
export interface ReachOptions {
  /**
   * A daemon on another host, `ssh://[user@]host[:port]` (the `--host` flag); otherwise
   * `$PROCCTL_HOST`; otherwise the local daemon.
   */
  host?: string;
  /** An explicit socket path (the `--socket` flag); otherwise resolved as the daemon does. With a host, the socket there. */
  socket?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * The other host the options name (`host`, else `$PROCCTL_HOST`), or undefined for this
 * host's daemon. A front door that would start a missing daemon starts none for a host.
 */
export function hostOf(opts: Pick<ReachOptions, 'host' | 'env'>): string | undefined {
  return opts.host ?? ((opts.env ?? process.env).PROCCTL_HOST || undefined);
}

/**
 * How to reach the daemon the options name: over ssh for a host, else the local socket. A
 * DaemonUnreachableError says why a dial failed; over ssh that may only show at the first call,
 * since ssh has no "connected" moment to wait for.
 */
export async function dialFor(opts: ReachOptions = {}): Promise<Dial> {
  const env = opts.env ?? process.env;
  const host = hostOf(opts);
  if (host === undefined) {
    const path = resolveSocketPath(opts.socket, env);
    const channel = channelDescriptor(path);
    return channel === undefined ? socketDial(path) : channelDial(channel);
  }
  // Loaded only for a remote daemon, so local commands do not pay for it.
  const { sshDial } = await import('./ssh.js');
  return sshDial(host, { env, socket: opts.socket, fromEnv: opts.host === undefined });
}
