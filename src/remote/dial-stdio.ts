import { connect } from 'node:net';
import { strangerOnSocket } from '../transport/dial.js';
import { describeConnectError, START_HINT } from '../transport/unreachable.js';

/** Exit statuses, as the CLI's (SPEC §11); not imported from cli/ so this path loads nothing else. */
const OK = 0;
const UNREACHABLE = 3;

/**
 * Join stdin/stdout to the daemon's socket, byte for byte, each way with backpressure. End of
 * stdin half-closes the socket (the daemon answers what was asked, then closes); the daemon
 * closing ends stdout. Resolves with the exit status: 0 when either side closed, 3 when the
 * socket cannot be reached or fails (said on stderr, with the hint).
 */
export function dialStdio(socketPath: string): Promise<number> {
  const { stdin, stdout, stderr } = process;
  return new Promise((resolve) => {
    // Not half-open: the daemon ending its side ends the conversation, even while stdin is open.
    const socket = connect({ path: socketPath });
    let connected = false;
    let status = OK;
    socket.on('error', (err: NodeJS.ErrnoException) => {
      const why = describeConnectError(err);
      stderr.write(connected ? `procctl: lost the connection to procctld at ${socketPath} (${why})\n` : `procctl: cannot reach procctld at ${socketPath} (${why}); ${START_HINT}\n`);
      status = UNREACHABLE;
    });
    socket.on('connect', () => {
      const stranger = strangerOnSocket(socket, socketPath);
      if (stranger) {
        stderr.write(`procctl: ${socketPath}: ${stranger}\n`);
        status = UNREACHABLE;
        socket.destroy();
        return;
      }
      connected = true;
      stdin.on('data', (chunk: Buffer) => {
        if (!socket.write(chunk)) stdin.pause();
      });
      socket.on('drain', () => stdin.resume());
      stdin.on('end', () => socket.end());
      // stdin gone bad is its end, as far as the daemon need know.
      stdin.on('error', () => socket.end());
    });
    socket.on('data', (chunk: Buffer) => {
      if (!stdout.write(chunk)) socket.pause();
    });
    stdout.on('drain', () => socket.resume());
    // The reader went away (ssh ended): the conversation is over.
    stdout.on('error', () => socket.destroy());
    socket.on('close', () => {
      // Let what is queued for stdout go out, then end even though stdin may still be open.
      if (stdout.writableLength === 0 || stdout.destroyed) resolve(status);
      else stdout.once('drain', () => resolve(status)).once('error', () => resolve(status));
    });
  });
}
