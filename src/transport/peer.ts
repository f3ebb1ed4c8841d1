import type { Socket } from 'node:net';
import { loadAddon } from '../base/addon.js';

/** Who connected: the kernel's record of the peer process when it connected. */
export interface PeerCredentials {
  pid: number;
  uid: number;
  gid: number;
}

type PeerAddon = { peerCredentials(fd: number): PeerCredentials | null };
let addon: PeerAddon | Error | undefined;

/**
 * The peer of a Unix socket connection (SO_PEERCRED, native/peer.c), or why it is not known:
 * for the log line of a refused request, so looked up only then.
 */
export function peerOf(socket: Socket): PeerCredentials | { unknown: string } {
  addon ??= loadAddon<PeerAddon>(['peerCredentials']);
  if (addon instanceof Error) return { unknown: addon.message };
  const fd = (socket as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) return { unknown: 'the connection has no descriptor (closed)' };
  return addon.peerCredentials(fd) ?? { unknown: 'the kernel did not say' };
}
