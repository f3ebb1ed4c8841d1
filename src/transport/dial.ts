import { connect } from 'node:net';
import { lstatSync } from 'node:fs';
import type { Socket } from 'node:net';
import { peerOf } from './peer.js';
import { DaemonUnreachableError, describeConnectError } from './unreachable.js';

/**
 * Why the process listening on this socket is not to be trusted, or undefined: it must run as this
 * user or as root (SO_PEERCRED; where that cannot be asked, the socket file's owner).
 */
export function strangerOnSocket(socket: Socket, path: string): string | undefined {
  const me = process.getuid?.();
  if (me === undefined) return undefined;
  const peer = peerOf(socket);
  let uid: number;
  if ('uid' in peer) uid = peer.uid;
  else {
    try {
      uid = lstatSync(path).uid;
    } catch {
      return undefined;
    }
  }
  return uid === me || uid === 0 ? undefined : `the process listening there runs as uid ${uid}, not as you (uid ${me}) or root: nothing was sent to it`;
}

/** What a transport hands to the client. */
export interface TransportSink {
  /** Bytes from the daemon. */
  data(chunk: Buffer): void;
  /** The transport has ended, and why; called once. */
  end(reason: DaemonUnreachableError): void;
}

/** A byte stream to a daemon: its Unix socket, or a child's stdio (`ssh … procctl dial-stdio`). */
export interface Transport {
  /** Where it leads, for messages: a socket path or an `ssh://` address. */
  readonly where: string;
  write(data: string): void;
  /** End it from this side; the sink's `end` follows. */
  close(): void;
}

/** Opens a transport, rejecting with a DaemonUnreachableError when it cannot. */
export type Dial = (sink: TransportSink) => Promise<Transport>;

/** The local daemon's Unix socket. */
export function socketDial(path: string): Dial {
  return (sink) =>
    new Promise((resolve, reject) => {
      const socket = connect(path);
      let closeReason = 'the daemon closed it';
      const onError = (err: NodeJS.ErrnoException) => reject(new DaemonUnreachableError(path, describeConnectError(err), 'connect', err.code));
      socket.once('error', onError);
      socket.once('connect', () => {
        socket.off('error', onError);
        // Nothing is sent (a token above all) to a socket someone else listens on (SPEC §2).
        const stranger = strangerOnSocket(socket, path);
        if (stranger) {
          socket.destroy();
          reject(new DaemonUnreachableError(path, stranger, 'connect', 'EPERM', 'remove the socket and start procctld yourself, or pass --socket PATH'));
          return;
        }
        socket.on('error', (err: NodeJS.ErrnoException) => (closeReason = describeConnectError(err)));
        socket.on('data', (chunk: Buffer) => sink.data(chunk));
        socket.on('close', () => sink.end(new DaemonUnreachableError(path, closeReason, 'lost')));
        resolve({ where: path, write: (data) => void socket.write(data), close: () => socket.destroy() });
      });
    });
}

