import { closeSync, openSync } from 'node:fs';
import { createServer, connect, Socket, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { loadAddon } from '../../../src/base/addon.js';
import { waitFor } from '../../helpers/daemon.js';

/**
 * The proxy channel's hand-over (native/channel.c): the sandbox's network helper sends the daemon
 * each connection it accepts, and the daemon takes sockets only. The peer is played here by this
 * process, sending what a hostile job that got hold of the helper's channel could send.
 */
interface ChannelAddon {
  socketPair(): [number, number];
  sendDescriptor(socket: number, fd: number): boolean;
  watchDescriptors(socket: number, onDescriptor: (fd: number) => void): { close(): void };
}

const addon = loadAddon<ChannelAddon>(['socketPair', 'sendDescriptor', 'watchDescriptors']);
const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0).reverse()) f();
});

function listen(): Promise<Server> {
  return new Promise((resolve) => {
    const server = createServer({ pauseOnConnect: true });
    server.listen(0, '127.0.0.1', () => resolve(server));
    cleanup.push(() => server.close());
  });
}

describe.skipIf(addon instanceof Error)('the proxy channel takes sockets only', () => {
  const a = addon as ChannelAddon;

  it('a connection handed over is served by the receiver, byte for byte, while the sender keeps no copy', async () => {
    const [ours, theirs] = a.socketPair();
    const got: number[] = [];
    const watch = a.watchDescriptors(ours, (fd) => {
      got.push(fd);
      if (fd < 0) return;
      const s = new Socket({ fd, readable: true, writable: true });
      s.on('data', (d) => s.end(`echo:${String(d)}`));
    });
    cleanup.push(() => watch.close(), () => closeSync(ours), () => closeSync(theirs));
    const server = await listen();
    server.on('connection', (job: Socket) => {
      const fd = (job as unknown as { _handle: { fd: number } })._handle.fd;
      expect(a.sendDescriptor(theirs, fd)).toBe(true);
      job.destroy();
    });
    const client = connect((server.address() as { port: number }).port, '127.0.0.1');
    cleanup.push(() => client.destroy());
    client.write('ping');
    let answer = '';
    client.on('data', (d) => (answer += String(d)));
    await waitFor(() => answer === 'echo:ping', { what: 'the answer from the receiving side' });
    expect(got.filter((fd) => fd >= 0)).toHaveLength(1);
  });

  it('a file or a directory sent instead is closed unread, and the peer going away is said once', async () => {
    const [ours, theirs] = a.socketPair();
    const got: number[] = [];
    const watch = a.watchDescriptors(ours, (fd) => got.push(fd));
    cleanup.push(() => watch.close(), () => closeSync(ours));
    const file = openSync('/etc/hostname', 'r');
    const dir = openSync('/', 'r');
    cleanup.push(() => closeSync(file), () => closeSync(dir));
    expect(a.sendDescriptor(theirs, file)).toBe(true);
    expect(a.sendDescriptor(theirs, dir)).toBe(true);
    // Then a real socket, so the test knows the watcher has read past the two before it.
    const [x, y] = a.socketPair();
    expect(a.sendDescriptor(theirs, x)).toBe(true);
    closeSync(x);
    closeSync(y);
    await waitFor(() => got.length >= 1, { what: 'the socket to arrive' });
    expect(got).toHaveLength(1);
    closeSync(got[0]);
    closeSync(theirs);
    await waitFor(() => got.length === 2, { what: 'the end of the channel to be said' });
    expect(got[1]).toBe(-1);
  });
});
