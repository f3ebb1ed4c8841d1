import { createHash } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons } from '../helpers/daemon.js';

afterAll(stopAllDaemons);

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

describe("scope '*' with the approver credential (SPEC §17: the console on a fresh install)", () => {
  it("is the operator's view where no adminToken is configured; without the credential it is refused", async () => {
    const d = await startDaemon();
    const c = await d.client();
    try {
      const r = await c.exec({ command: 'echo in-a', scope: 'a' });
      const all = await c.request('process', { action: 'list', scope: '*', ...asPerson(d) });
      expect(all.error).toBeUndefined();
      expect(all.result.sessions.find((s: any) => s.sessionId === r.sessionId)?.scope).toBe('a');
      for (const extra of [{}, { approverToken: 'not-it' }, { token: asPerson(d).approverToken }]) {
        const e = await c.request('process', { action: 'list', scope: '*', ...extra });
        expect(e.error?.data?.kind, JSON.stringify(extra)).toBe('forbidden');
        expect(e.error?.message).toMatch(/adminToken.*approver credential/);
      }
    } finally {
      c.close();
      await d.stop();
    }
  });

  it('does not stand in for a configured adminToken', async () => {
    const d = await startDaemon({ config: { adminToken: `sha256:${sha256('0perator')}` } });
    const c = await d.client();
    try {
      const e = await c.request('process', { action: 'list', scope: '*', ...asPerson(d) });
      expect(e.error?.data?.kind).toBe('forbidden');
      const ok = await c.request('process', { action: 'list', scope: '*', token: '0perator' });
      expect(ok.error).toBeUndefined();
    } finally {
      c.close();
      await d.stop();
    }
  });
});
