import { describe, expect, it } from 'vitest';
import type { InterceptClient } from '../../../src/netproxy/intercept.js';
import { TlsThread } from '../../../src/netproxy/tls-thread.js';

/** The thread's side, played by hand: what the daemon hears from it (TlsThread.heard) about a session it numbered. */
interface Played {
  sessionOf(client: InterceptClient): number;
  end(session: number): void;
  heard(m: { kind: 'denied'; session: number; host: string; reason: string } | { kind: 'used'; session: number; name: string; host: string }): void;
}

// A job that refuses the proxy's certificate exits at once: the thread's word of the refusal (and of
// a credential's use) can come after its session ended here, and must still reach the session.
describe('the proxy TLS thread, after a session ended', () => {
  it('still tells the session a refusal and a use the thread reports late', () => {
    const told: string[] = [];
    const client = {
      denied: (host: string, reason: string) => told.push(`denied ${host}: ${reason}`),
      used: (name: string, host: string) => told.push(`used ${name} at ${host}`),
    } as unknown as InterceptClient;
    const t = new TlsThread() as unknown as Played;
    const id = t.sessionOf(client);
    t.end(id);
    t.heard({ kind: 'denied', session: id, host: '127.0.0.1', reason: 'credential_tls_refused: bad certificate' });
    t.heard({ kind: 'used', session: id, name: 'API', host: '127.0.0.1' });
    expect(told).toEqual(['denied 127.0.0.1: credential_tls_refused: bad certificate', 'used API at 127.0.0.1']);
    // A number the daemon never gave (or one long ended) is nobody's: nothing is told.
    t.heard({ kind: 'denied', session: id + 1000, host: 'x', reason: 'y' });
    expect(told).toHaveLength(2);
  });
});
