import { closeSync, existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { InterceptClient, ProxyCredential } from './intercept.js';
import type { ByName } from './policy.js';

/** What the daemon tells the proxy's TLS thread. */
export type ToTlsThread =
  | {
      kind: 'serve';
      id: number;
      session: number;
      /** A descriptor of the job's stream, the CONNECT answered; the thread owns it from now on. */
      fd: number;
      /** What the job sent after its CONNECT (the start of its TLS handshake). */
      head: Uint8Array;
      host: string;
      port: number;
      /** The leaf for `host` the daemon's CA signed, as PEM. */
      key: string;
      cert: string;
      client: { policy: ByName; credentials: ProxyCredential[]; upstreamCa?: string };
    }
  | { kind: 'close'; id: number }
  | { kind: 'end'; session: number };

/** What it tells the daemon back. */
export type FromTlsThread =
  | { kind: 'denied'; session: number; host: string; reason: string }
  | { kind: 'used'; session: number; name: string; host: string }
  | { kind: 'closed'; id: number };

const WORKER = new URL('./tls-worker.js', import.meta.url);

/** Ended sessions whose late word from the thread is still told (TlsThread.ended). */
const ENDED_KEPT = 64;

/**
 * The thread that ends TLS for the credentials' hosts (SPEC §21), away from the daemon's: every
 * byte of an intercepted download is decrypted, scrubbed and encrypted again, and on the
 * daemon's own thread that stalled every other client of the daemon while it ran. The daemon
 * still accepts the job's stream and answers its CONNECT (the policy is judged there); then it
 * hands the stream's descriptor over with the session's credentials and a certificate for the
 * host, and gets back each refusal, each use of a credential, and each stream's end. One thread
 * for every session, started at the first intercepted stream and kept (a new one when it ends).
 * The session's end closes its streams and its upstream pool there as it would here.
 */
export class TlsThread {
  private worker: Worker | undefined;
  private next = 1;
  private readonly ids = new WeakMap<InterceptClient, number>();
  private readonly sessions = new Map<number, { client: InterceptClient; open: number; release: () => void }>();
  private readonly streams = new Map<number, { session: number; release: () => void }>();
  /**
   * The clients of the last sessions ended, by their number there: what the thread says of a
   * stream after its session ended here (a refusal read as the job exits, a credential's use) is
   * still told to its session, never dropped. The job that refuses the proxy's certificate ends
   * at once, and the thread's word of it raced its session's end.
   */
  private readonly ended = new Map<number, InterceptClient>();

  /** Whether the thread's code is there (a build; not when the sources run as they are, e.g. under a test runner). */
  static available(): boolean {
    return WORKER.protocol === 'file:' && existsSync(fileURLToPath(WORKER));
  }

  /** Hand the job's stream (`fd`, now the thread's) over to be served as `host:port`. */
  serve(fd: number, head: Buffer, host: string, port: number, client: InterceptClient, leaf: { key: string; cert: string }): void {
    const worker = this.start();
    const session = this.sessionOf(client);
    const id = this.next++;
    const s = this.sessions.get(session)!;
    s.open++;
    this.streams.set(id, { session, release: client.hold?.({ close: () => this.post({ kind: 'close', id }) }) ?? (() => undefined) });
    const message: ToTlsThread = {
      kind: 'serve',
      id,
      session,
      fd,
      head,
      host,
      port,
      ...leaf,
      client: {
        policy: client.policy,
        credentials: (client.credentials ?? []).map((c) => ({ name: c.name, hosts: [...c.hosts], header: c.header, value: c.value, placeholder: c.placeholder, ...(c.withdrawn === undefined ? {} : { withdrawn: c.withdrawn }) })),
        ...(client.upstreamCa ? { upstreamCa: client.upstreamCa } : {}),
      },
    };
    try {
      worker.postMessage(message);
    } catch {
      closeSync(fd);
      this.closed(id);
    }
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER, { name: 'procctl-proxy-tls' });
    // The daemon's exit is not held up by it; its streams end with the process.
    worker.unref();
    worker.on('message', (m: FromTlsThread) => this.heard(m));
    const gone = () => {
      if (this.worker !== worker) return;
      this.worker = undefined;
      for (const id of [...this.streams.keys()]) this.closed(id);
      for (const s of this.sessions.values()) s.release();
      this.sessions.clear();
    };
    worker.on('error', gone);
    worker.on('exit', gone);
    this.worker = worker;
    return worker;
  }

  private sessionOf(client: InterceptClient): number {
    let id = this.ids.get(client);
    if (id === undefined || !this.sessions.has(id)) {
      const made = this.next++;
      id = made;
      this.ids.set(client, made);
      // The session's pool there is closed at its end, as the streams are.
      const release = client.hold?.({ close: () => this.end(made) });
      this.sessions.set(made, { client, open: 0, release: release ?? (() => undefined) });
    }
    return id;
  }

  private heard(m: FromTlsThread): void {
    if (m.kind === 'closed') return this.closed(m.id);
    const client = this.sessions.get(m.session)?.client ?? this.ended.get(m.session);
    if (!client) return;
    if (m.kind === 'denied') client.denied(m.host, m.reason);
    else client.used?.(m.name, m.host);
  }

  private closed(id: number): void {
    const stream = this.streams.get(id);
    if (!stream) return;
    this.streams.delete(id);
    stream.release();
    const s = this.sessions.get(stream.session);
    if (!s) return;
    s.open--;
    // A session nobody closes (no hold): its pool goes with its last stream.
    if (s.open === 0 && !s.client.hold) this.end(stream.session);
  }

  private end(session: number): void {
    const s = this.sessions.get(session);
    if (!s) return;
    this.sessions.delete(session);
    this.ended.set(session, s.client);
    if (this.ended.size > ENDED_KEPT) this.ended.delete(this.ended.keys().next().value!);
    s.release();
    this.post({ kind: 'end', session });
  }

  private post(m: ToTlsThread): void {
    this.worker?.postMessage(m);
  }
}
