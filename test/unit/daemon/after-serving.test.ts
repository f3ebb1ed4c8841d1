import { describe, expect, it } from 'vitest';
import { Records } from '../../../src/daemon/records.js';

/**
 * afterServing runs what a planned restart left to do for each handed session once the image
 * serves: one that throws is logged with its session and the rest, and `then`, still run.
 */
describe('Records.afterServing', () => {
  it('goes on past a session whose step throws, logs it with the session id, and calls then', async () => {
    const logged: { sessionId?: string; err?: string }[] = [];
    const log = { error: (o: { sessionId?: string; err?: string }) => logged.push(o) };
    // Only afterServing is exercised: the store, registry and guardian are not reached by it.
    const records = new Records(undefined as never, undefined as never, undefined as never, log as never);
    const ran: string[] = [];
    (records as unknown as { handedOver: { id: string; run: () => void }[] }).handedOver = [
      { id: 'a', run: () => ran.push('a') },
      {
        id: 'b',
        run: () => {
          throw new Error('ENOSPC: no space left on device');
        },
      },
      { id: 'c', run: () => ran.push('c') },
    ];
    const done = new Promise<void>((resolve) => records.afterServing(resolve));
    await done;
    expect(ran).toEqual(['a', 'c']);
    expect(logged).toEqual([expect.objectContaining({ sessionId: 'b', err: 'ENOSPC: no space left on device' })]);
  });
});
