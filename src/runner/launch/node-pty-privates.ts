import { ReadStream } from 'node:tty';

/**
 * What a tapped launch takes of node-pty's terminal beyond its public API (`pid`, `onExit`): the
 * job's side's name (`ptsName`), the master's descriptor (`_fd`) and node-pty's stream on it
 * (`_socket`, a tty.ReadStream), as @lydell/node-pty 1.1.0 (the version package.json pins) sets
 * them in its UnixTerminal's constructor.
 */
export interface PtyPrivates {
  pts: string;
  master: number;
  socket: ReadStream;
}

/**
 * node-pty's terminal as the tap needs it, or why it cannot be had (a node-pty whose internals
 * changed): the launch then lets node-pty read the terminal, and says why in the daemon's log.
 * Its stream must be on the master and must not have read yet (it is destroyed before its first
 * read, in the tick of the spawn; a byte it read would be lost to the tap).
 */
export function ptyPrivates(term: object): PtyPrivates | string {
  const t = term as { ptsName?: unknown; _fd?: unknown; _socket?: unknown };
  const missing = [
    typeof t.ptsName === 'string' && t.ptsName.startsWith('/dev/') ? undefined : 'ptsName (the job side\'s path)',
    typeof t._fd === 'number' && Number.isInteger(t._fd) && t._fd >= 0 ? undefined : '_fd (the master\'s descriptor)',
    t._socket instanceof ReadStream ? undefined : '_socket (a tty.ReadStream on the master)',
  ].filter((m): m is string => m !== undefined);
  if (missing.length > 0) return `node-pty's terminal lacks ${missing.join(', ')}, which @lydell/node-pty 1.1.0 has: install the version package.json pins`;
  const socket = t._socket as ReadStream;
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (fd !== undefined && fd !== t._fd) return `node-pty's stream reads descriptor ${fd}, not its master (${String(t._fd)})`;
  if (socket.destroyed || socket.bytesRead > 0) return `node-pty's stream on the master has ${socket.destroyed ? 'closed' : `read ${socket.bytesRead} bytes`} already`;
  return { pts: t.ptsName as string, master: t._fd as number, socket };
}
