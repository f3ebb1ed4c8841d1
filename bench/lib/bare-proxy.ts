/**
 * The floors the network-by-name bench measures procctl's proxy against, in a process of their
 * own: `node bare-proxy.js http` is the smallest forward proxy Node's http makes (a request in,
 * the same request out on a fresh connection, the answer piped back: no policy, no DNS, no
 * CONNECT); `node bare-proxy.js relay PORT` forwards every connection to 127.0.0.1:PORT through
 * the addon's kernel relay (native/relay.c) and nothing else. Each prints the port it listens on.
 */
import { request, createServer as createHttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { loadAddon } from '../../src/addon.js';

interface RelayAddon {
  relay(a: number, b: number, onEnd: () => void): () => void;
  dupDescriptor(fd: number): number;
}

const fdOf = (s: object) => (s as { _handle?: { fd?: number } })._handle?.fd ?? -1;

function bareHttp(): Server {
  return createHttpServer((req, res) => {
    const url = new URL(req.url ?? '');
    const up = request({ host: url.hostname, port: url.port, path: url.pathname, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
}

function bareRelay(port: number): Server {
  const addon = loadAddon<RelayAddon>(['relay', 'dupDescriptor']);
  if (addon instanceof Error) throw addon;
  return createServer({ pauseOnConnect: true }, (job) => {
    const up = connect(port, '127.0.0.1', () => {
      addon.relay(addon.dupDescriptor(fdOf(job)), addon.dupDescriptor(fdOf(up)), () => {});
      job.destroy();
      up.destroy();
    });
    up.on('error', () => job.destroy());
  });
}

const [kind, port] = process.argv.slice(2);
const server = kind === 'relay' ? bareRelay(Number(port)) : bareHttp();
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
