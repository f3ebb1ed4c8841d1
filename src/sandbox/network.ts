import { fileURLToPath } from 'node:url';
import type { Config, NetworkPolicy } from '../config/schema.js';

/** The port a network-by-name session's proxy listens on, inside its own network namespace (nothing else is there). */
export const PROXY_PORT = 3128;

/** The network of a scope's sessions: `scopes.NAME.network`, else `sandbox.network`. */
export function networkOf(config: Pick<Config, 'sandbox' | 'scopes'>, scope: string): NetworkPolicy {
  return config.scopes[scope]?.network ?? config.sandbox.network;
}

/** The policy when it is by name (a proxy of the daemon's decides), else undefined. */
export function byName(policy: NetworkPolicy): Exclude<NetworkPolicy, boolean> | undefined {
  return typeof policy === 'object' ? policy : undefined;
}

/** The program that runs first inside such a sandbox: it serves the port and starts the job (inside-net.ts). */
export const INSIDE_NET = fileURLToPath(new URL('./inside-net.js', import.meta.url));

/** What a job of such a session is told about its proxy (both cases: tools read one or the other). */
export function proxyEnv(port = PROXY_PORT): Record<string, string> {
  const http = `http://127.0.0.1:${port}`;
  const socks = `socks5h://127.0.0.1:${port}`;
  const local = 'localhost,127.0.0.1,::1';
  return { HTTP_PROXY: http, HTTPS_PROXY: http, ALL_PROXY: socks, NO_PROXY: local, http_proxy: http, https_proxy: http, all_proxy: socks, no_proxy: local };
}
