import type { Socket } from 'node:net';

/** How long a refused connection is kept open to be read from after its line, if its client does not close it first. */
export const REFUSED_LINGER_MS = 5000;
/** Refused connections read from at once (each a descriptor): past these, one is closed as soon as its line is out. */
const MAX_LINGERING = 256;
/** Refused connections still open: a shutdown closes them at once. */
const lingering = new Set<Socket>();

/**
 * Tell a client why its connection is refused, and end it so that the line reaches it whatever
 * the client does next. The line and the end of the stream go out at once, so a client that
 * reads sees both without waiting. The daemon then goes on reading, and drops what it reads,
 * until the client closes, or REFUSED_LINGER_MS pass: a client that writes after the refusal
 * (a request sent a moment after it connected) must not find the connection gone. Closed at
 * once, its write failed with EPIPE, and Node, destroying the client's socket for it, never read
 * the line waiting there: the client saw the connection close without a word
 * (test/stress/refusals.stress.ts). A client that neither reads nor closes loses nothing it
 * would have read, and its connection is closed after the linger: none is held longer, even
 * one whose line cannot go out.
 */
export function refuseConnection(socket: Socket, line: string): void {
  // A client already gone: there is no one left to tell, and nothing to log.
  socket.on('error', () => {});
  // Never held longer, even when the line cannot go out (a client that reads nothing of a full buffer).
  const timer = setTimeout(() => socket.destroy(), REFUSED_LINGER_MS);
  timer.unref();
  const many = lingering.size >= MAX_LINGERING;
  lingering.add(socket);
  socket.once('close', () => {
    lingering.delete(socket);
    clearTimeout(timer);
  });
  if (many) {
    socket.end(line, () => socket.destroy());
    return;
  }
  socket.end(line);
  // Read to the client's end (the socket then closes itself, its writing done): nothing it sends is kept.
  socket.resume();
}

/** Close every refused connection still open (a shutdown: the server's close waits for them). */
export function closeRefused(): void {
  for (const socket of lingering) socket.destroy();
}
