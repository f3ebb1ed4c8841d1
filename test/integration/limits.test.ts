import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';

/**
 * Protocol abuse (SPEC §4): a batch cannot get around the backpressure, one user's connections and
 * incomplete frames are bounded, deep nesting is invalid params; each next to a client that is
 * still served.
 */

let d: TestDaemon;
const sockets = new Set<Socket>();

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await d?.stop();
});

/** A raw connection that collects what the daemon says, and notes when it is closed. */
async function raw(at: TestDaemon = d): Promise<{ socket: Socket; text: () => string; closed: Promise<void> }> {
  const socket = connect(at.socket);
  sockets.add(socket);
  let text = '';
  socket.setEncoding('utf8').on('data', (c: string) => (text += c));
  socket.on('error', () => {});
  const closed = new Promise<void>((r) => socket.on('close', () => r()));
  await new Promise<void>((r, j) => {
    socket.once('connect', () => r());
    socket.once('error', j);
  });
  return { socket, text: () => text, closed };
}

const request = (id: number, method: string, params: object) => JSON.stringify({ jsonrpc: '2.0', id, method, params });

async function served(): Promise<void> {
  const c = await d.client();
  try {
    expect(await c.exec({ command: 'echo still served' })).toMatchObject({ status: 'completed', output: 'still served\n' });
  } finally {
    c.close();
  }
}

describe('protocol limits', () => {
  beforeAll(async () => {
    d = await startDaemon({ config: { rpc: { maxConnectionsPerUid: 12, maxPartialBytesPerUid: 1024 * 1024, partialFrameTimeoutMs: 1000 } } });
  });

  it('a batch of more than 100 requests is one -32600 naming the limit; 100 are answered', async () => {
    const c = await raw();
    const big = Array.from({ length: 10_000 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'process', params: { action: 'list' } }));
    c.socket.write(`${JSON.stringify(big)}\n`);
    await waitFor(() => c.text().includes('\n'), { what: 'the answer to the batch' });
    const answer = JSON.parse(c.text().split('\n')[0]);
    expect(answer.error.code).toBe(-32600);
    expect(answer.error.message).toContain('at most 100');
    const ok = await raw();
    ok.socket.write(`${JSON.stringify(big.slice(0, 100))}\n`);
    await waitFor(() => ok.text().includes('\n'), { what: 'the answers to 100' });
    expect(JSON.parse(ok.text().split('\n')[0])).toHaveLength(100);
    await served();
  });

  it('params nested 5,000 deep are invalid params, not an internal error', async () => {
    const c = await raw();
    const deep = `${'{"a":'.repeat(5000)}1${'}'.repeat(5000)}`;
    c.socket.write(`{"jsonrpc":"2.0","id":1,"method":"checkpoint","params":{"sessionId":"x","name":"n","data":${deep}}}\n`);
    await waitFor(() => c.text().includes('\n'), { what: 'the answer' });
    const answer = JSON.parse(c.text().split('\n')[0]);
    expect(answer.error.code).toBe(-32602);
    expect(answer.error.data.kind).toBe('invalid');
    expect(answer.error.message).toContain('nested deeper');
    await served();
  });

  it("one user's connections are bounded: the one past maxConnectionsPerUid is told why and closed; sessions still run", async () => {
    const held: Awaited<ReturnType<typeof raw>>[] = [];
    // A few of the budget are the tests' own clients; fill the rest.
    for (let i = 0; i < 30; i++) {
      const c = await raw();
      held.push(c);
    }
    await waitFor(() => held.some((c) => c.text().includes('maxConnectionsPerUid')), { what: 'a refusal' });
    const refused = held.filter((c) => c.text().includes('maxConnectionsPerUid'));
    expect(refused.length).toBeGreaterThan(0);
    expect(JSON.parse(refused[0].text().split('\n')[0]).error.data.kind).toBe('limit');
    await Promise.all(refused.map((c) => c.closed));
    // An admitted one still works, and once some close, new ones are admitted again.
    const admitted = held.find((c) => !c.text().includes('maxConnectionsPerUid'))!;
    admitted.socket.write(`${request(7, 'exec', { command: 'echo admitted' })}\n`);
    await waitFor(() => admitted.text().includes('admitted'), { what: 'the admitted connection to be served' });
    for (const c of held) c.socket.destroy();
    await Promise.all(held.map((c) => c.closed));
    // The daemon lets go of each as it sees it close: then a new one is admitted.
    await waitFor(
      async () => {
        const c = await raw();
        c.socket.write(`${request(1, 'daemon.status', {})}\n`);
        // Answered, or closed (refused while the daemon has not yet let go of the closed ones): either ends this try.
        let gone = false;
        void c.closed.then(() => (gone = true));
        await waitFor(() => c.text().includes('\n') || gone, { what: 'an answer or the close' });
        c.socket.destroy();
        return c.text().includes('"result"') || undefined;
      },
      { what: 'a new connection to be admitted' },
    );
    await served();
  });

  it("incomplete frames are bounded per user, and one left sitting is closed after partialFrameTimeoutMs", async () => {
    const a = await raw();
    const b = await raw();
    const c = await raw();
    const part = `{"jsonrpc":"2.0","id":1,"method":"exec","params":{"command":"echo ${'x'.repeat(400 * 1024)}`;
    a.socket.write(part);
    b.socket.write(part);
    c.socket.write(part);
    await Promise.race([a.closed, b.closed, c.closed]);
    const all = [a, b, c];
    const closedOne = all.find((x) => x.text().includes('maxPartialBytesPerUid'));
    expect(closedOne, all.map((x) => x.text()).join('|')).toBeDefined();
    await served();
    // Those left sitting are closed once they have been idle for the timeout.
    await Promise.all(all.map((x) => x.closed));
    const left = all.filter((x) => x !== closedOne);
    expect(left.every((x) => x.text().includes('partialFrameTimeoutMs')), left.map((x) => x.text().slice(0, 300)).join(' | ')).toBe(true);
    await served();
  });

});

describe('a refused connection holds no place in its user\'s budget while it lingers', () => {
  const LIMIT = 3;
  let e: TestDaemon;
  beforeAll(async () => {
    e = await startDaemon({ config: { rpc: { maxConnectionsPerUid: LIMIT, maxPartialBytesPerUid: 1024 } } });
  });
  afterAll(async () => {
    await e?.stop();
  });

  type Raw = Awaited<ReturnType<typeof raw>>;
  /** A new connection, if the daemon admits it (it answers a request on it); one refused is closed here. */
  async function tryAdmit(): Promise<Raw | undefined> {
    const c = await raw(e);
    c.socket.write(`${request(1, 'daemon.status', {})}\n`);
    let gone = false;
    void c.closed.then(() => (gone = true));
    await waitFor(() => c.text().includes('\n') || gone, { what: 'an answer or the close' });
    if (c.text().includes('"result"')) return c;
    c.socket.destroy();
    return undefined;
  }
  /** A connection admitted, once the daemon has let go of those closed before (it sees each close a moment later). */
  const admitted = () => waitFor(tryAdmit, { what: 'a connection to be admitted' });
  const logged = (what: string) => e.stdout().split(what).length - 1;

  it('at the limit, one refused and kept open unread does not stop a new one being admitted once a live one closes', async () => {
    const live = [await admitted(), await admitted(), await admitted()];
    const before = logged('refused a connection');
    const unread = await raw(e);
    unread.socket.pause();
    await waitFor(() => logged('refused a connection') > before, { what: 'the refusal' });
    live[0].socket.destroy();
    await live[0].closed;
    // The daemon sees the close a moment later: until then a new one may still be refused.
    const again = await admitted();
    for (const c of [...live, again, unread]) c.socket.destroy();
  });

  it('at the limit, one refused for its incomplete frame and kept open unread gives its place back at once', async () => {
    const live = [await admitted(), await admitted(), await admitted()];
    const before = logged('rpc.maxPartialBytesPerUid');
    // Past the user's bytes of incomplete frames: refused; its client neither reads nor closes.
    live[0].socket.pause();
    live[0].socket.write(`{"jsonrpc":"2.0","id":2,"method":"exec","params":{"command":"echo ${'x'.repeat(4096)}`);
    await waitFor(() => logged('rpc.maxPartialBytesPerUid') > before, { what: 'the refusal' });
    // Its place is free while its refusal lingers: the next connection is admitted, the first one tried.
    const next = await tryAdmit();
    expect(next).toBeDefined();
    // Still at the limit with live ones: one more is refused.
    const over = await raw(e);
    await waitFor(() => over.text().includes('maxConnectionsPerUid'), { what: 'the refusal of one past the limit' });
    for (const c of [...live, next!, over]) c.socket.destroy();
  });
});
