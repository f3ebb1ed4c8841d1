import type { Socket } from 'node:net';
import { splice, type Hold } from './splice.js';

/** SOCKS5 reply codes (RFC 1928). */
const OK = 0x00;
const NOT_ALLOWED = 0x02;
const HOST_UNREACHABLE = 0x04;
const COMMAND_NOT_SUPPORTED = 0x07;
const ADDRESS_NOT_SUPPORTED = 0x08;

/**
 * A SOCKS5 server for one stream (RFC 1928): no authentication, CONNECT only, to an IPv4, IPv6
 * or domain name destination, which `open` judges and connects. Hand-written: the protocol's
 * server side is two small messages, and the SOCKS libraries on npm are clients or unkept.
 */
export async function socks5(socket: Socket, open: (host: string, port: number) => Promise<Socket | { refused: string }>, hold?: Hold): Promise<void> {
  const read = reader(socket);
  const [version, methods] = await read(2);
  if (version !== 0x05) return void socket.destroy();
  const offered = await read(methods);
  if (!offered.includes(0x00)) {
    socket.end(Buffer.from([0x05, 0xff]));
    return;
  }
  socket.write(Buffer.from([0x05, 0x00]));
  const [, command, , type] = await read(4);
  let host: string;
  if (type === 0x01) host = [...(await read(4))].join('.');
  else if (type === 0x04) {
    const b = await read(16);
    host = Array.from({ length: 8 }, (_, i) => b.readUInt16BE(i * 2).toString(16)).join(':');
  } else if (type === 0x03) host = (await read((await read(1))[0])).toString('latin1');
  else return reply(socket, ADDRESS_NOT_SUPPORTED, true);
  const port = (await read(2)).readUInt16BE(0);
  if (command !== 0x01) return reply(socket, COMMAND_NOT_SUPPORTED, true);
  const up = await open(host, port);
  if ('refused' in up) return reply(socket, up.refused.startsWith('blocked ') ? NOT_ALLOWED : HOST_UNREACHABLE, true);
  reply(socket, OK, false);
  const rest = read.rest();
  socket.removeAllListeners('data');
  if (rest.length > 0) up.write(rest);
  splice(socket, up, hold);
}

function reply(socket: Socket, code: number, end: boolean): void {
  const message = Buffer.from([0x05, code, 0x00, 0x01, 0, 0, 0, 0, 0, 0]);
  if (end) socket.end(message);
  else socket.write(message);
}

/** Read exactly n bytes at a time from a stream; what came after is kept for `rest()`. */
function reader(socket: Socket): ((n: number) => Promise<Buffer>) & { rest(): Buffer } {
  let buffered = Buffer.alloc(0);
  let waiting: (() => void) | undefined;
  let ended = false;
  socket.on('data', (chunk: Buffer) => {
    buffered = Buffer.concat([buffered, chunk]);
    waiting?.();
  });
  socket.once('close', () => {
    ended = true;
    waiting?.();
  });
  socket.resume();
  const read = async (n: number): Promise<Buffer> => {
    while (buffered.length < n) {
      if (ended) throw new Error('the SOCKS client went away');
      await new Promise<void>((r) => (waiting = r));
      waiting = undefined;
    }
    const out = buffered.subarray(0, n);
    buffered = buffered.subarray(n);
    return out;
  };
  return Object.assign(read, { rest: () => buffered });
}
