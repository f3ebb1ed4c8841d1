import { createHash, randomBytes } from 'node:crypto';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { splice, type Held } from '../../../src/netproxy/splice.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * The proxy's relay (src/netproxy/splice.ts, native/relay.c): two real TCP connections on
 * loopback, joined in the middle the way a CONNECT tunnel is (the job's socket and the
 * upstream's), checked end to end: the bytes, both directions, each direction ending on its own,
 * what Node had read before the handover, and a close from the session.
 */
const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0).reverse()) f();
});

/** A connected pair: the far end (`outer`, the job or the server) and the proxy's end (`inner`). */
async function pair(): Promise<{ outer: Socket; inner: Socket }> {
  const server: Server = createServer({ pauseOnConnect: true });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const accepted = new Promise<Socket>((r) => server.once('connection', r));
  const outer = connect((server.address() as { port: number }).port, '127.0.0.1');
  const inner = await accepted;
  await new Promise((r) => outer.once('connect', r));
  server.close();
  cleanup.push(() => {
    outer.destroy();
    inner.destroy();
  });
  return { outer, inner };
}

/** Everything a socket receives until its peer ends, and whether it ended cleanly. */
function received(s: Socket): Promise<Buffer> {
  const parts: Buffer[] = [];
  s.on('data', (d: Buffer) => parts.push(d));
  return new Promise((resolve, reject) => {
    s.once('end', () => resolve(Buffer.concat(parts)));
    s.once('error', reject);
  });
}

const digest = (b: Buffer) => createHash('sha256').update(b).digest('hex');

function holder(): { hold: (h: Held) => () => void; held: Set<Held> } {
  const held = new Set<Held>();
  return {
    held,
    hold: (h) => {
      held.add(h);
      return () => void held.delete(h);
    },
  };
}

describe('the proxy relay', () => {
  it('carries 32 MiB one way and 4 MiB the other, each direction ending on its own, then lets go', async () => {
    const job = await pair();
    const up = await pair();
    const { hold, held } = holder();
    job.outer.allowHalfOpen = true;
    up.outer.allowHalfOpen = true;
    splice(job.inner, up.inner, hold);
    // Held: the kernel relays it (the JavaScript fallback holds nothing).
    await waitFor(() => held.size === 1 || undefined, { what: 'the relay to take over' });
    const down = randomBytes(32 * 1024 * 1024);
    const upload = randomBytes(4 * 1024 * 1024);
    const atJob = received(job.outer);
    const atServer = received(up.outer);
    up.outer.end(down);
    // The server finished sending: the job still gets all of it, and can still send its own.
    expect(digest(await atJob)).toBe(digest(down));
    job.outer.end(upload);
    expect(digest(await atServer)).toBe(digest(upload));
    await waitFor(() => held.size === 0 || undefined, { what: 'the relay to end and release its hold' });
  });

  it('bytes Node read before the handover go first, in order', async () => {
    const job = await pair();
    const up = await pair();
    job.inner.resume();
    const early = Buffer.from('early bytes, read by Node before the relay took over;');
    job.outer.write(early);
    // Let Node read them into the stream's buffer, unconsumed.
    job.inner.pause();
    await waitFor(() => job.inner.readableLength >= early.length || undefined, { what: 'Node to have read the early bytes' });
    splice(job.inner, up.inner);
    const atServer = received(up.outer);
    const late = randomBytes(1024 * 1024);
    job.outer.end(late);
    const got = await atServer;
    expect(got.subarray(0, early.length).toString()).toBe(early.toString());
    expect(digest(got.subarray(early.length))).toBe(digest(late));
  });

  it("the session's close ends the relay: both far ends see the connection go", async () => {
    const job = await pair();
    const up = await pair();
    const { hold, held } = holder();
    splice(job.inner, up.inner, hold);
    await waitFor(() => held.size === 1 || undefined, { what: 'the relay to be held' });
    const closed = (s: Socket) => new Promise<void>((r) => s.once('close', () => r()));
    const both = Promise.all([closed(job.outer), closed(up.outer)]);
    job.outer.resume();
    up.outer.resume();
    for (const h of held) h.close();
    await both;
    await waitFor(() => held.size === 0 || undefined, { what: 'the hold to be released' });
  });
});
