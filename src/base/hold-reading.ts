import type { Readable } from 'node:stream';

/**
 * Stop reading a stream (what comes waits in the kernel: a pipe's, a terminal master's or a
 * socket's buffer) until the returned resume. Pausing alone is not enough: libuv goes on reading
 * into the stream's buffer, so its handle's reading is stopped too.
 */
export function holdReading(socket: Readable): () => void {
  socket.pause();
  const handle = (socket as unknown as { _handle?: { reading?: boolean; readStop?: () => number; readStart: () => number } })._handle;
  const stopped = handle?.reading && handle.readStop ? handle : undefined;
  if (stopped) {
    stopped.reading = false;
    stopped.readStop!();
  }
  return () => {
    if (stopped) {
      stopped.reading = true;
      stopped.readStart();
    }
    if (!socket.destroyed) socket.resume();
  };
}
