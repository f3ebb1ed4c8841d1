import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestClient } from '../helpers/rpc.js';
import { Wire } from '../stress/wire.js';

/**
 * The tests' own line reader (test/helpers/ndjson.ts), under the request client and the bulk
 * wire: what a daemon sends, cut anywhere, is read as its lines, blank ones passed over.
 */
const dir = mkdtempSync(join(tmpdir(), 'procctl-ndjson-'));
const path = join(dir, 'sock');
let server: Server;
const peers: Socket[] = [];

let taken = 0;

/** The server's end of the next connection not yet taken. */
function nextPeer(): Promise<Socket> {
  const at = taken++;
  return new Promise((resolve) => {
    const look = () => (peers.length > at ? resolve(peers[at]) : setTimeout(look, 5));
    look();
  });
}

beforeAll(async () => {
  server = createServer((s) => peers.push(s));
  await new Promise<void>((r) => server.listen(path, r));
});

afterAll(() => {
  for (const p of peers) p.destroy();
  server.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('the tests\' line reader', () => {
  it('gives the request client its answers and notifications, lines cut across reads and blank lines between them', async () => {
    const c = await TestClient.connect(path);
    const peer = await nextPeer();
    const answered = c.request('x', undefined, 7);
    const text = `\n${JSON.stringify({ jsonrpc: '2.0', method: 'note', params: { n: 1 } })}\n\n${JSON.stringify({ jsonrpc: '2.0', id: 7, result: 'ok' })}\n`;
    for (const piece of [text.slice(0, 10), text.slice(10, 50), text.slice(50)]) peer.write(piece);
    expect(await answered).toEqual({ jsonrpc: '2.0', id: 7, result: 'ok' });
    expect(c.notifications).toEqual([{ jsonrpc: '2.0', method: 'note', params: { n: 1 } }]);
    await c.until(() => c.notifications.length === 1, 1000);
    await expect(c.until(() => c.notifications.length === 2, 50)).rejects.toThrow('condition not met in time');
    c.close();
  });

  it('keeps the wire\'s answers in order and a line that is not JSON apart, and says when the peer closed', async () => {
    const w = await Wire.connect(path);
    const peer = await nextPeer();
    peer.write('{"id":1}\n{"id"');
    peer.write(':2}\nnot json\n\n{"id":3}');
    expect(await w.until(() => w.answers.length === 2 && w.notJson.length === 1, 10_000)).toBe(true);
    expect(w.answers).toEqual([{ id: 1 }, { id: 2 }]);
    expect(w.notJson).toEqual(['not json']);
    expect(await w.until(() => w.answers.length === 3, 50)).toBe(false);
    peer.end('\n');
    expect(await w.until(() => w.closed, 10_000)).toBe(true);
    expect(w.answers).toEqual([{ id: 1 }, { id: 2 }, { id: 3 }]);
  });
});
