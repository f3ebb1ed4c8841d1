import { DaemonUnreachableError } from '../transport/unreachable.js';

/** How an ssh child ended, as the transport saw it. */
export interface SshEnd {
  /** The address, for messages. */
  where: string;
  /** The host alone, for hints. */
  host: string;
  /** `[-p PORT] [user@]host` as ssh takes it, for hints that run ssh. */
  login: string;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** The last of what ssh (and the far side) wrote to stderr. */
  stderr: string;
  /** Bytes that came back through ssh: none means the daemon was never reached. */
  received: number;
  /** The command line to try by hand, for the generic hint. */
  byHand: string;
}

/** The line of ssh's stderr that says what happened: the last one that is not a routine warning. */
export function telltaleLine(stderr: string): string | undefined {
  const lines = stderr
    .split(/\r?\n/)
    .map((l) => l.trim())
    .filter((l) => l !== '' && !/^Warning: Permanently added /.test(l));
  return lines.at(-1);
}

const AUTH = /Permission denied|Too many authentication failures|Authentication failed|no matching (host key type|key exchange|cipher|MAC)/i;
const HOST_KEY = /Host key verification failed|REMOTE HOST IDENTIFICATION HAS CHANGED|host key .* not known/i;
const UNKNOWN_HOST = /Could not resolve hostname|Name or service not known|nodename nor servname/i;
const NO_ROUTE = /Connection refused|timed out|No route to host|Network is unreachable|Connection closed by|Connection reset|kex_exchange_identification/i;

/**
 * Why an ssh transport ended, in words that name the problem and the fix, with ssh's own line.
 * Before any byte came back it is a failed connect (exit status 3 with the hint); after, a lost
 * connection.
 */
export function sshFailure(e: SshEnd): DaemonUnreachableError {
  const line = telltaleLine(e.stderr);
  const quoted = line !== undefined ? `: ${line}` : '';
  const phase = e.received > 0 ? 'lost' : 'connect';
  const fail = (reason: string, hint?: string) => new DaemonUnreachableError(e.where, reason, phase, e.code === null ? undefined : String(e.code), hint ?? `run \`${e.byHand}\` by hand to see why`);

  if (e.signal !== null) return fail(`ssh was ended by ${e.signal}${quoted}`);
  if (e.received > 0) {
    // The daemon was reached; it (or dial-stdio, or ssh) ended the conversation.
    if (e.code === 0) return fail('the daemon closed it');
    return fail(`ssh ended with status ${e.code}${quoted}`);
  }
  if (e.code === 255) {
    const text = line ?? '';
    if (AUTH.test(text))
      return fail(
        `ssh could not log in${quoted}`,
        `give ssh a key that ${e.host} accepts (ssh-agent, ~/.ssh/config, or PROCCTL_SSH_COMMAND='ssh -i KEY') and add its public key to ~/.ssh/authorized_keys there (docs/remote.md)`,
      );
    if (HOST_KEY.test(e.stderr)) return fail(`ssh does not trust the host key${quoted}`, `connect once with \`ssh ${e.login}\` to check and record its host key`);
    if (UNKNOWN_HOST.test(text)) return fail(`ssh cannot find the host${quoted}`, 'check the host name in --host or $PROCCTL_HOST');
    if (NO_ROUTE.test(text)) return fail(`ssh cannot connect${quoted}`, `check the host and port, and that sshd runs on ${e.host}`);
    return fail(`ssh failed${quoted}`);
  }
  if (e.code === 127 || e.code === 126)
    return fail(
      `procctl cannot be run there${quoted}`,
      `install procctl on ${e.host} where a non-interactive ssh session finds it on PATH, or name its full path in a forced command in authorized_keys (docs/remote.md)`,
    );
  if (e.code === 3) return fail(`procctld is not running there${quoted}`, `start procctld on ${e.host} (as a service: docs/systemd.md)`);
  if (e.code === 2 && /unknown command/i.test(e.stderr)) return fail(`the procctl there has no dial-stdio${quoted}`, `update procctl on ${e.host}`);
  if (e.code === 0)
    return fail(
      'the far side ended without a word from the daemon',
      `check that the command run there is \`procctl dial-stdio\` (a forced command in authorized_keys decides it); try \`${e.byHand}\``,
    );
  return fail(`ssh ended with status ${e.code}${quoted}`);
}
