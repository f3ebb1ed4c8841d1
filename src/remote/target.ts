import { shellQuote } from '../base/shell-quote.js';

/** A daemon's host as `--host ssh://[user@]host[:port]` names it. */
export interface SshTarget {
  user?: string;
  host: string;
  port?: number;
  /** The address as given, for messages. */
  url: string;
}

const FORM = 'ssh://[user@]host[:port]';

/** Parse `ssh://[user@]host[:port]`; the error says what is wrong and what form is expected. */
export function parseSshTarget(value: string): SshTarget {
  const bad = (why: string) => new Error(`"${value}" ${why}; write the host as ${FORM}`);
  if (!/^ssh:\/\//i.test(value)) throw bad(value.includes('://') ? 'is not an ssh:// address' : 'has no ssh:// in front');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw bad('is not a valid address');
  }
  if (url.password) throw bad('has a password in it (ssh asks for one itself, or better uses a key)');
  if ((url.pathname !== '' && url.pathname !== '/') || url.search || url.hash) throw bad('has a path, query or fragment after the host');
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  const user = url.username ? decodeURIComponent(url.username) : undefined;
  if (!host) throw bad('names no host');
  // A leading dash would reach ssh as an option (`-oProxyCommand=…`).
  if (host.startsWith('-') || user?.startsWith('-')) throw bad('starts a host or user with "-"');
  if (user !== undefined && /[\s@]/.test(user)) throw bad('has a space or "@" in the user');
  return { ...(user !== undefined ? { user } : {}), host, ...(url.port ? { port: Number(url.port) } : {}), url: value };
}

/**
 * The ssh command line for a target: the ssh words, then `[-p port] [user@]host`, then the
 * command the far side runs. ssh joins that command with spaces for the remote shell, so the
 * socket path (the `--socket` given with `--host` names the socket there) is quoted for it.
 */
export function sshArgv(ssh: string[], t: SshTarget, socket?: string): string[] {
  const remote = ['procctl', ...(socket !== undefined ? ['--socket', shellQuote(socket)] : []), 'dial-stdio'];
  return [...ssh, ...(t.port !== undefined ? ['-p', String(t.port)] : []), t.user !== undefined ? `${t.user}@${t.host}` : t.host, ...remote];
}
