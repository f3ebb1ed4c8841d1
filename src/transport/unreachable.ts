/** What to do when a local daemon cannot be reached. */
export const START_HINT = 'start it with `procctld` (or `procctl daemon`; in a checkout, `npm start`) or pass --socket';

/**
 * The daemon could not be reached, or the connection to it was lost mid-conversation. `where`
 * is a socket path or an `ssh://` address; `hint` says how to fix a failed connect.
 */
export class DaemonUnreachableError extends Error {
  constructor(
    readonly where: string,
    readonly reason: string,
    readonly phase: 'connect' | 'lost',
    readonly code?: string,
    readonly hint: string = START_HINT,
  ) {
    super(phase === 'connect' ? `cannot reach procctld at ${where} (${reason})` : `lost the connection to procctld at ${where} (${reason})`);
    this.name = 'DaemonUnreachableError';
  }

  /** The socket path, for a local daemon (the same as `where`). */
  get socketPath(): string {
    return this.where;
  }
}

/** Human words for the errors a connect to a Unix socket can fail with. */
export function describeConnectError(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ENOENT':
      return 'no socket there';
    case 'ECONNREFUSED':
      return 'nothing is listening on it';
    case 'EACCES':
    case 'EPERM':
      return 'permission denied';
    case 'ENOTSOCK':
      return 'not a socket';
    default:
      return err.message;
  }
}
