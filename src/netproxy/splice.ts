import { closeSync } from 'node:fs';
import type { Socket } from 'node:net';
import { loadAddon } from '../base/addon.js';

/** What the session holds while a tunnel is open, and closes at its end. */
export interface Held {
  close(): void;
}

/** Keeps a tunnel the relay took over counted with the session (`release` once it has ended). */
export type Hold = (held: Held) => () => void;

interface RelayAddon {
  relay(a: number, b: number, onEnd: (aToB: number, bToA: number) => void): () => void;
  dupDescriptor(fd: number): number;
}

let addon: RelayAddon | Error | undefined;

/** How long the handover waits for what Node still has to write on either socket. */
const FLUSH_WAIT_MS = 5000;

/**
 * Join two connected sockets both ways, once a proxy's handshake is done. Where the addon is
 * there, the kernel relays (native/relay.c: splice(2) through a pipe, on a thread of its own):
 * Node stops reading both, writes on what it had read and not passed on, waits until it has
 * written everything, and hands a copy of each descriptor to the relay, which owns them from
 * then on. Else, or if the handover cannot be made, the streams are piped in JavaScript. Either
 * way, either end failing closes both; `hold` keeps the relay counted with its session.
 */
export function splice(a: Socket, b: Socket, hold?: Hold): void {
  addon ??= loadAddon<RelayAddon>(['relay', 'dupDescriptor']);
  if (addon instanceof Error || fdOf(a) === undefined || fdOf(b) === undefined) return pipeBoth(a, b);
  const relay = addon;
  // Bytes Node read before it stopped go on first, in order, through Node. Reading them may
  // start the handle reading again; it is stopped after, in the same turn, so nothing more is read.
  a.pause();
  b.pause();
  const fromA = unread(a);
  const fromB = unread(b);
  stopReading(a);
  stopReading(b);
  if (fromA.length > 0) b.write(fromA);
  if (fromB.length > 0) a.write(fromB);
  void Promise.all([flushed(a), flushed(b)]).then(([okA, okB]) => {
    const fa = fdOf(a);
    const fb = fdOf(b);
    if (!okA || !okB || fa === undefined || fb === undefined) return pipeBoth(a, b);
    // The relay owns the copies once it has started; until then (or if it cannot start: no
    // descriptor or thread left) they are closed here and Node carries on with its own.
    const ends: number[] = [];
    let release = () => {};
    let close: () => void;
    try {
      ends.push(relay.dupDescriptor(fa), relay.dupDescriptor(fb));
      close = relay.relay(ends[0], ends[1], () => release());
    } catch {
      for (const fd of ends) closeSync(fd);
      return pipeBoth(a, b);
    }
    a.destroy();
    b.destroy();
    release = hold?.({ close }) ?? release;
  });
}

/** Whether `handOff` can take this socket: the addon is there and the socket has a descriptor. */
export function canHandOff(s: Socket): boolean {
  addon ??= loadAddon<RelayAddon>(['relay', 'dupDescriptor']);
  return !(addon instanceof Error) && fdOf(s) !== undefined;
}

/**
 * Take a connected socket away from Node's loop on this thread, for another to serve (the
 * proxy's TLS thread): reading stops at once, what was read and not consumed is returned with a
 * copy of its descriptor once everything queued on it has been written, and the socket is
 * closed here. Undefined (and the socket destroyed) if it could not be written out in time.
 */
export async function handOff(s: Socket): Promise<{ fd: number; unread: Buffer } | undefined> {
  if (!canHandOff(s)) return undefined;
  const relay = addon as RelayAddon;
  s.pause();
  const rest = unread(s);
  stopReading(s);
  const ok = await flushed(s);
  const fd = fdOf(s);
  if (!ok || fd === undefined) {
    s.destroy();
    return undefined;
  }
  let copy: number;
  try {
    copy = relay.dupDescriptor(fd);
  } catch {
    s.destroy();
    return undefined;
  }
  s.destroy();
  return { fd: copy, unread: rest };
}

/** The socket's descriptor while it is open (a TCP or Unix socket on Linux), else undefined. */
function fdOf(s: Socket): number | undefined {
  if (s.destroyed) return undefined;
  const fd = (s as unknown as { _handle?: { fd?: number } })._handle?.fd;
  return typeof fd === 'number' && fd >= 0 ? fd : undefined;
}

/** Node reads no more from the socket (its own `reading` mark stays, so it does not start again). */
function stopReading(s: Socket): void {
  (s as unknown as { _handle?: { readStop?(): void } })._handle?.readStop?.();
}

/** What the stream has buffered and nobody read yet. */
function unread(s: Socket): Buffer {
  const parts: Buffer[] = [];
  for (let chunk = s.read() as Buffer | null; chunk !== null; chunk = s.read() as Buffer | null) parts.push(chunk);
  return Buffer.concat(parts);
}

/** Once Node has written everything queued on the socket: true, or false if it failed or took too long. */
async function flushed(s: Socket): Promise<boolean> {
  const deadline = Date.now() + FLUSH_WAIT_MS;
  while (s.writableLength > 0) {
    if (s.destroyed || Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  return !s.destroyed;
}

/** The JavaScript relay: where the addon is absent, or a socket is not one it can take. */
function pipeBoth(a: Socket, b: Socket): void {
  a.pipe(b);
  b.pipe(a);
  const close = () => {
    a.destroy();
    b.destroy();
  };
  a.on('error', close).on('close', close);
  b.on('error', close).on('close', close);
  a.resume();
  b.resume();
}
