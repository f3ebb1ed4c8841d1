import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Connection } from '../../../src/rpc/connection.js';
import { ClientBudget, type Slot } from '../../../src/rpc/limits.js';

const KB = 1024;
const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const fn of cleanup.splice(0)) fn();
});

/** Three connections of one uid sharing one budget, over real sockets; bytes are fed to the daemon's side directly, so their order is exact. */
async function threeConnections(budget: ClientBudget): Promise<{ server: Socket; client: Socket; connection: Connection; slot: Slot }[]> {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-budget-'));
  const path = join(dir, 's');
  const accepted: Socket[] = [];
  const server: Server = createServer((s) => accepted.push(s));
  await new Promise<void>((r) => server.listen(path, r));
  const clients = [connect(path), connect(path), connect(path)];
  await new Promise<void>((resolve) => {
    const check = (): void => (accepted.length === 3 ? resolve() : void setImmediate(check));
    check();
  });
  cleanup.push(() => {
    for (const s of [...clients, ...accepted]) s.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const log = pino({ level: 'silent' });
  return accepted.map((s, i) => {
    clients[i].on('data', () => {});
    const slot = budget.admit(0)!;
    return { server: s, client: clients[i], slot, connection: new Connection(s, new Map(), 4 * 1024 * KB, log, { of: budget, uid: 0, slot }) };
  });
}

describe('the incomplete-frame budget shared by a uid', () => {
  it("gives a refused connection's bytes back at its refusal, before it has finished closing", async () => {
    const budget = new ClientBudget({ connectionsPerUid: 10, partialBytesPerUid: 1024 * KB, partialFrameTimeoutMs: 60_000 });
    const [a, b, c] = await threeConnections(budget);
    c.server.emit('data', Buffer.alloc(1000 * KB, 'x'));
    c.server.emit('data', Buffer.alloc(200 * KB, 'x'));
    // c is over the budget and refused; its socket is still open. a and b, 800 kB together, fit.
    expect(c.connection.closed).toBe(false);
    a.server.emit('data', Buffer.alloc(400 * KB, 'y'));
    b.server.emit('data', Buffer.alloc(400 * KB, 'y'));
    expect(budget.holdPartial(0, 0)).toBe(true);
    // One byte more than the budget from a is refused: the tally is exact, not merely forgiving.
    a.server.emit('data', Buffer.alloc(224 * KB + 1, 'y'));
    const told = (x: { client: Socket }): Promise<string> =>
      new Promise((resolve) => {
        let text = '';
        x.client.on('data', (d: Buffer) => (text += d.toString()));
        x.client.on('close', () => resolve(text));
      });
    const [toldA, toldC] = await Promise.all([told(a), told(c)]);
    expect(toldC).toContain('rpc.maxPartialBytesPerUid');
    expect(toldA).toContain('rpc.maxPartialBytesPerUid');
    expect(b.connection.closed).toBe(false);
    // a's refusal gave back its 624 kB too: b's 400 kB is all the uid holds.
    expect(budget.holdPartial(0, 624 * KB)).toBe(true);
    expect(budget.holdPartial(0, 1)).toBe(false);
  });

  it("gives a refused connection's place among its user's connections back at its refusal, and only once", async () => {
    const budget = new ClientBudget({ connectionsPerUid: 3, partialBytesPerUid: 1024 * KB, partialFrameTimeoutMs: 60_000 });
    const [a, , c] = await threeConnections(budget);
    expect(budget.admit(0)).toBeUndefined();
    // Over the bytes of incomplete frames: refused, its socket still open while its refusal lingers.
    c.server.emit('data', Buffer.alloc(1100 * KB, 'x'));
    expect(c.connection.closed).toBe(false);
    const next = budget.admit(0);
    expect(next).toBeDefined();
    expect(budget.admit(0)).toBeUndefined();
    // Its close gives back nothing more (the daemon releases the slot at every close): still at the limit.
    c.slot.release();
    expect(budget.admit(0)).toBeUndefined();
    // A live one closing does give its place back.
    a.slot.release();
    expect(budget.admit(0)).toBeDefined();
  });
});
