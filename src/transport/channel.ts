import { Socket } from 'node:net';
import { constants } from 'node:os';
import { addonFix, loadAddon } from '../base/addon.js';
import type { Dial } from './dial.js';
import { DaemonUnreachableError } from './unreachable.js';

/** What to do when the channel cannot be had. */
const CHANNEL_HINT = 'the channel lives as long as the session and is inherited by its processes; inside the sandbox only `procctl checkpoint` reaches the daemon';

/** `$PROCCTL_SOCKET` inside a confined session: `fd:N`, the session's channel inherited as descriptor N. */
const CHANNEL = /^fd:(\d+)$/;

interface ChannelAddon {
  receiveConnection(socket: number, timeoutMs: number): number;
}

/** How long a job waits for its channel to hand it a connection. */
const RECEIVE_TIMEOUT_MS = 10_000;

/** The inherited descriptor a `$PROCCTL_SOCKET` of `fd:N` names, or undefined for a path. */
export function channelDescriptor(socket: string): number | undefined {
  const m = CHANNEL.exec(socket);
  return m ? Number(m[1]) : undefined;
}

/**
 * A confined job's line back (SPEC §12, daemon/channel.ts): it cannot make a Unix socket, so it
 * asks the descriptor it inherited for a connection of its own (native/channel.c) and speaks
 * JSON-RPC on that. The daemon serves only `checkpoint` for this session there.
 */
export function channelDial(fd: number): Dial {
  const where = `the session's channel (inherited descriptor ${fd})`;
  return async (sink) => {
    const addon = loadAddon<ChannelAddon>(['receiveConnection']);
    if (addon instanceof Error) throw new DaemonUnreachableError(where, `reaching it needs procctl's addon: ${addon.message}; ${addonFix()}`, 'connect', 'ENOENT', CHANNEL_HINT);
    let connection: number;
    try {
      connection = addon.receiveConnection(fd, RECEIVE_TIMEOUT_MS);
    } catch (err) {
      const e = err as Error & { errno?: number };
      const hint = e.errno === constants.errno.EBADF ? `descriptor ${fd} is not open here: a process of the job closed it, or this shell is not the session's` : e.message;
      throw new DaemonUnreachableError(where, hint, 'connect', 'ECONNREFUSED', CHANNEL_HINT);
    }
    const socket = new Socket({ fd: connection, readable: true, writable: true });
    let closeReason = 'the daemon closed it';
    socket.on('error', (err) => (closeReason = err.message));
    socket.on('data', (chunk: Buffer) => sink.data(chunk));
    socket.on('close', () => sink.end(new DaemonUnreachableError(where, closeReason, 'lost')));
    return { where, write: (data) => void socket.write(data), close: () => socket.destroy() };
  };
}
