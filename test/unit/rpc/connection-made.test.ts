import { mkdtempSync, rmSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { Connection, type Method } from '../../../src/rpc/connection.js';
import { JsonText } from '../../../src/tools/json-text.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const fn of cleanup.splice(0)) fn();
});

/**
 * One connection with `methods` over a real Unix socket; `ask` sends a line and resolves with the
 * next line answered. `accepted` is given the daemon's end of it before the connection is made.
 */
async function connection(methods: Map<string, Method>, accepted_?: (s: Socket) => void): Promise<(line: string) => Promise<string>> {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-made-'));
  const path = join(dir, 's');
  let accepted: Socket | undefined;
  const server = createServer((s) => {
    accepted = s;
    accepted_?.(s);
    new Connection(s, methods, 1 << 20, pino({ level: 'silent' }));
  });
  await new Promise<void>((r) => server.listen(path, r));
  const client = connect(path);
  cleanup.push(() => {
    client.destroy();
    accepted?.destroy();
    server.close();
    rmSync(dir, { recursive: true, force: true });
  });
  let held = '';
  const waiting: ((line: string) => void)[] = [];
  client.setEncoding('utf8');
  client.on('data', (chunk: string) => {
    held += chunk;
    for (let nl = held.indexOf('\n'); nl !== -1; nl = held.indexOf('\n')) {
      const line = held.slice(0, nl);
      held = held.slice(nl + 1);
      waiting.shift()?.(line);
    }
  });
  return (line) => new Promise((resolve) => {
    waiting.push(resolve);
    client.write(`${line}\n`);
  });
}

describe('a result whose JSON is made (JsonText)', () => {
  const made = { sessions: [{ sessionId: 'a1', name: 'ünïcode ✓', tail: 'line\n"quoted"' }], total: 1 };
  const methods = new Map<string, Method>([['made', () => new JsonText(Buffer.from(JSON.stringify(made)))]]);

  it('is written as its bytes, in a response like any other', async () => {
    const ask = await connection(methods);
    const line = await ask('{"jsonrpc":"2.0","id":7,"method":"made"}');
    expect(line).toBe(`{"jsonrpc":"2.0","id":7,"result":${JSON.stringify(made)}}`);
    expect(JSON.parse(await ask('{"jsonrpc":"2.0","id":"x","method":"made"}'))).toEqual({ jsonrpc: '2.0', id: 'x', result: made });
  });

  it('is answered within a batch too', async () => {
    const ask = await connection(methods);
    const batch = JSON.parse(await ask('[{"jsonrpc":"2.0","id":1,"method":"made"},{"jsonrpc":"2.0","id":2,"method":"nope"}]'));
    expect(batch[0]).toEqual({ jsonrpc: '2.0', id: 1, result: made });
    expect(batch[1].error.code).toBe(-32601);
  });

  it('gives its value to an ordinary JSON.stringify', () => {
    expect(JSON.parse(JSON.stringify({ r: new JsonText(Buffer.from('{"a":[1,"é"]}')) }))).toEqual({ r: { a: [1, 'é'] } });
  });
});

describe('a made result that wants its bytes back', () => {
  it('is told once its bytes are written, and only then', async () => {
    let told = 0;
    const methods = new Map<string, Method>([['made', () => new JsonText(Buffer.from('{"a":1}'), () => told++)]]);
    const ask = await connection(methods);
    expect(told).toBe(0);
    expect(await ask('{"jsonrpc":"2.0","id":1,"method":"made"}')).toBe('{"jsonrpc":"2.0","id":1,"result":{"a":1}}');
    await ask('{"jsonrpc":"2.0","id":2,"method":"made"}');
    expect(told).toBe(2);
  });

  it('is told the same when its JSON is held as a string', async () => {
    let told = 0;
    const methods = new Map<string, Method>([['made', () => new JsonText('{"a":"é"}', () => told++)]]);
    const ask = await connection(methods);
    expect(await ask('{"jsonrpc":"2.0","id":1,"method":"made"}')).toBe('{"jsonrpc":"2.0","id":1,"result":{"a":"é"}}');
    await ask('{"jsonrpc":"2.0","id":2,"method":"made"}');
    expect(told).toBe(2);
  });
});

describe('an answer at hand', () => {
  it('is written in the turn its line was read, before any microtask its method queued', async () => {
    const order: string[] = [];
    const methods = new Map<string, Method>([
      [
        'now',
        () => {
          queueMicrotask(() => order.push('microtask'));
          return { at: 'once' };
        },
      ],
      ['later', async () => ({ at: 'later' })],
    ]);
    const ask = await connection(methods, (s) => {
      const write = s.write.bind(s) as (...args: unknown[]) => boolean;
      (s as { write: unknown }).write = (...args: unknown[]) => {
        order.push('write');
        return write(...args);
      };
    });
    expect(JSON.parse(await ask('{"jsonrpc":"2.0","id":1,"method":"now"}')).result).toEqual({ at: 'once' });
    expect(order).toEqual(['write', 'microtask']);
    // A method that answers a promise is answered when it settles, as before.
    expect(JSON.parse(await ask('{"jsonrpc":"2.0","id":2,"method":"later"}')).result).toEqual({ at: 'later' });
  });
});
