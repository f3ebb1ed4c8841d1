import { connect } from 'node:net';
import { DaemonUnreachableError, describeConnectError } from './unreachable.js';

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
        socket.on('error', (err: NodeJS.ErrnoException) => (closeReason = describeConnectError(err)));
        socket.on('data', (chunk: Buffer) => sink.data(chunk));
        socket.on('close', () => sink.end(new DaemonUnreachableError(path, closeReason, 'lost')));
        resolve({ where: path, write: (data) => void socket.write(data), close: () => socket.destroy() });
      });
    });
}

