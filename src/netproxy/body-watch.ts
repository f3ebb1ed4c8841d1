import type { IncomingMessage } from 'node:http';
import type { Http2ServerRequest } from 'node:http2';
import { partialTail } from '../base/scrub.js';

/** A plain HTTP request body of at most this many bytes (by its Content-Length) is read whole and judged before anything is sent. */
export const PREJUDGED_BODY_BYTES = 64 * 1024;

/**
 * Looks for credentials' placeholders in a request body as it passes (SPEC §21: the placeholder
 * sent to a host not its credential's is refused wherever the proxy sees it). Every byte is
 * looked at; a chunk that ends with the start of a placeholder keeps that start back until the
 * next chunk says whether the rest follows, so the placeholder itself is never passed on. Only
 * the bytes that are a placeholder's start are held (mostly none), so a streamed body (a gRPC
 * call) is not delayed. Plain bytes only: a compressed or otherwise encoded body is not decoded.
 */
export class PlaceholderWatch<C extends { placeholder: string }> {
  private readonly watched: { credential: C; find: Buffer }[];
  private held: Buffer | undefined;

  constructor(credentials: readonly C[]) {
    this.watched = credentials.filter((c) => c.placeholder.length > 0).map((credential) => ({ credential, find: Buffer.from(credential.placeholder) }));
  }

  get empty(): boolean {
    return this.watched.length === 0;
  }

  /** What may be passed on of the body so far, or the credential whose placeholder it carries. */
  write(chunk: Buffer): Buffer | { found: C } {
    if (this.watched.length === 0) return chunk;
    const data = this.held ? Buffer.concat([this.held, chunk]) : chunk;
    this.held = undefined;
    for (const w of this.watched) if (data.includes(w.find)) return { found: w.credential };
    const keep = partialTail(data, this.watched);
    if (keep === 0) return data;
    this.held = Buffer.from(data.subarray(data.length - keep));
    return data.subarray(0, data.length - keep);
  }

  /** What was kept back, at the body's end (by then it is known not to be a placeholder). */
  end(): Buffer {
    const rest = this.held ?? Buffer.alloc(0);
    this.held = undefined;
    return rest;
  }
}

/** Where a request's body goes: written with backpressure, then ended (its trailers first, where it carries them). */
export interface BodySink {
  write(chunk: Buffer): boolean;
  once(event: 'drain', listener: () => void): unknown;
  end(): void;
}

/**
 * Pass a request's body on to `to` through `watch`: a placeholder found stops it at once
 * (`stray` is told; nothing from that chunk on is written), else `ended` is called at its end
 * (to send trailers and end `to`). Backpressure as a pipe's.
 */
export function pumpBody<C extends { placeholder: string }>(
  from: IncomingMessage | Http2ServerRequest,
  to: BodySink,
  watch: PlaceholderWatch<C>,
  stray: (c: C) => void,
  ended: () => void,
): void {
  let stopped = false;
  from.on('data', (chunk: Buffer) => {
    if (stopped) return;
    const out = watch.write(chunk);
    if (!Buffer.isBuffer(out)) {
      stopped = true;
      from.pause();
      return stray(out.found);
    }
    if (out.length > 0 && !to.write(out)) {
      from.pause();
      to.once('drain', () => from.resume());
    }
  });
  from.once('end', () => {
    if (stopped) return;
    const rest = watch.end();
    if (rest.length > 0) to.write(rest);
    ended();
  });
}

/** The whole body of a request whose Content-Length said it is small (PREJUDGED_BODY_BYTES at most). */
export function readSmallBody(from: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const parts: Buffer[] = [];
    let size = 0;
    from.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > PREJUDGED_BODY_BYTES) return reject(new Error(`the request body is longer than its Content-Length said`));
      parts.push(chunk);
    });
    from.once('end', () => resolve(Buffer.concat(parts, size)));
    from.once('error', reject);
  });
}
