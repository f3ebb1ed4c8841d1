import { Socket } from 'node:net';
import { parentPort } from 'node:worker_threads';
import { Interceptor, type InterceptClient } from './intercept.js';
import type { Held } from './splice.js';
import type { FromTlsThread, ToTlsThread } from './tls-thread.js';

/**
 * The proxy's TLS thread (tls-thread.ts starts it): serves the connections the daemon hands it
 * for the credentials' hosts (SPEC §21), each a descriptor of the job's stream with its CONNECT
 * already answered, and tells the daemon each refusal, each use of a credential and each end.
 */
const port = parentPort;
if (!port) throw new Error('tls-worker.js runs as the proxy TLS thread (node:worker_threads), not on its own');

interface Session {
  client: InterceptClient;
  /** What the session holds here (its upstream pool): closed at its end. */
  held: Set<Held>;
  streams: Set<Socket>;
}

const interceptor = new Interceptor();
const sessions = new Map<number, Session>();
const streams = new Map<number, Socket>();
const say = (m: FromTlsThread) => port.postMessage(m);

function sessionOf(m: Extract<ToTlsThread, { kind: 'serve' }>): Session {
  let s = sessions.get(m.session);
  if (!s) {
    const held = new Set<Held>();
    const id = m.session;
    s = {
      held,
      streams: new Set(),
      client: {
        ...m.client,
        denied: (host, reason) => say({ kind: 'denied', session: id, host, reason }),
        used: (name, host) => say({ kind: 'used', session: id, name, host }),
        hold: (h) => {
          held.add(h);
          return () => void held.delete(h);
        },
      },
    };
    sessions.set(id, s);
  }
  return s;
}

port.on('message', (m: ToTlsThread) => {
  if (m.kind === 'serve') {
    const session = sessionOf(m);
    let socket: Socket;
    try {
      socket = new Socket({ fd: m.fd, readable: true, writable: true });
    } catch {
      say({ kind: 'closed', id: m.id });
      return;
    }
    streams.set(m.id, socket);
    session.streams.add(socket);
    socket.on('error', () => socket.destroy());
    socket.once('close', () => {
      streams.delete(m.id);
      session.streams.delete(socket);
      say({ kind: 'closed', id: m.id });
    });
    try {
      interceptor.serve(socket, Buffer.from(m.head), m.host, m.port, session.client, { key: m.key, cert: m.cert });
    } catch (err) {
      session.client.denied(m.host, `the proxy could not end TLS for ${m.host}: ${(err as Error).message}`);
      socket.destroy();
    }
  } else if (m.kind === 'close') {
    streams.get(m.id)?.destroy();
  } else if (m.kind === 'end') {
    const s = sessions.get(m.session);
    if (!s) return;
    sessions.delete(m.session);
    for (const h of s.held) h.close();
    for (const socket of s.streams) socket.destroy();
  }
});
