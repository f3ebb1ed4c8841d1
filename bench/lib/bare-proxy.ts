/**
 * The floors the network-by-name bench measures procctl's proxy against, in a process of their
 * own: `node bare-proxy.js http` is the smallest forward proxy Node's http makes (a request in,
 * the same request out on a fresh connection, the answer piped back: no policy, no DNS, no
 * CONNECT); `node bare-proxy.js relay PORT` joins every connection to 127.0.0.1:PORT by the
 * proxy's own handover to the addon's kernel relay (netproxy/splice.ts, native/relay.c), and
 * does nothing else. Each prints the port it listens on.
 */
import { request, createServer as createHttpServer } from 'node:http';
import { connect, createServer, type AddressInfo, type Server } from 'node:net';
import { splice } from '../../src/netproxy/splice.js';

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

/** Each connection joined to 127.0.0.1:PORT by the proxy's own handover to the kernel relay (netproxy/splice.ts). */
function bareRelay(port: number): Server {
  return createServer((job) => {
    const up = connect(port, '127.0.0.1', () => splice(job, up));
    up.on('error', () => job.destroy());
  });
}

const [kind, port] = process.argv.slice(2);
const server = kind === 'relay' ? bareRelay(Number(port)) : bareHttp();
server.listen(0, '127.0.0.1', () => process.stdout.write(`${(server.address() as AddressInfo).port}\n`));
