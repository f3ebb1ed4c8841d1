import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { alive, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { groupMembers } from '../helpers/procs.js';
import type { RpcResponse, TestClient } from '../helpers/rpc.js';
import { Scoped, Scopes, within } from '../helpers/session.js';

const MAX_FRAME = 4096;

let d: TestDaemon;
let b: TestClient;
let bystander: Scoped;
let pendingExec: Promise<any>;
let bystanderPid: number;
let scopes: Scopes;
const clients: TestClient[] = [];

async function client(): Promise<TestClient> {
  const c = await d.client();
  clients.push(c);
  return c;
}

beforeAll(async () => {
  // The bystander waits on stdin for the whole file: waiting-for-input detection (SPEC §7) would end its wait.
  d = await startDaemon({ env: { PROCCTL_MAX_FRAME_BYTES: String(MAX_FRAME), PROCCTL_KILL_GRACE_MS: '1000', PROCCTL_INTERRUPT: 'false' } });
  b = await d.client();
  scopes = new Scopes(() => b);
  bystander = scopes.next('bystander');
  // Client B keeps a foreground exec pending through every test of this file.
  pendingExec = bystander.exec({ command: 'read x; echo "got-$x"', yieldMs: 110_000 });
  const running = await waitFor(async () => (await bystander.list())[0], { what: 'the bystander session' });
  bystanderPid = running.pid;
  scopes.track(bystanderPid);
});

afterAll(async () => {
  try {
    await scopes.finish(d);
  } finally {
    for (const c of [b, ...clients]) c?.close();
    await stopAllDaemons();
  }
});

/** Client B can still run commands, and its pending exec is still pending. */
async function bystanderWorks(): Promise<void> {
  const r = await within(bystander.exec({ command: 'echo still-here' }), 15_000, 'bystander exec');
  expect(r.output).toBe('still-here\n');
  const listed = (await bystander.list()).find((x) => x.pid === bystanderPid);
  expect(listed.status).toBe('running');
  expect(alive(bystanderPid)).toBe(true);
}

let bystanderDone = false;

// Whatever a test sent, client B (with its exec still pending) keeps working.
afterEach(async () => {
  if (!bystanderDone) await bystanderWorks();
});

/** Send a line and expect no response: a later request answers while nothing else arrives. */
async function expectNoResponse(c: TestClient, line: string): Promise<void> {
  const before = c.unmatched.length;
  c.sendRaw(line);
  await c.request('daemon.status');
  await c.request('daemon.status');
  expect(c.unmatched.slice(before)).toEqual([]);
}

describe('JSON-RPC errors', () => {
  it('invalid JSON → -32700 with id null; the connection keeps working', async () => {
    const a = await client();
    const r = await a.rawResponse('{"jsonrpc":"2.0","id":1,"method":\n');
    expect(r.error?.code).toBe(-32700);
    expect(r.id).toBeNull();
    const ok = await a.request('daemon.status');
    expect(ok.result?.pid).toBe(d.proc.pid);
    await bystanderWorks();
  });

  it('binary garbage and invalid UTF-8 → -32700', async () => {
    const a = await client();
    a.sendRaw(Buffer.from([0, 0xff, 0xfe, 0xc3, 0x28, 0x80, 1, 2, 3, 0x0a]));
    await a.until(() => a.unmatched.length > 0);
    const r = a.unmatched[0];
    expect(r.error?.code).toBe(-32700);
    await bystanderWorks();
  });

  it.each([
    ['"method" is a number', '{"jsonrpc":"2.0","id":7,"method":5}', 7],
    ['params is a string', '{"jsonrpc":"2.0","id":8,"method":"process","params":"list"}', 8],
    ['params is a number', '{"jsonrpc":"2.0","id":9,"method":"process","params":3}', 9],
    ['jsonrpc is missing', '{"id":10,"method":"daemon.status"}', 10],
    ['jsonrpc is "1.0"', '{"jsonrpc":"1.0","id":11,"method":"daemon.status"}', 11],
    ['the id is an object', '{"jsonrpc":"2.0","id":{"a":1},"method":"daemon.status"}', null],
    ['a bare number', '42', null],
    ['a bare string', '"hello"', null],
    ['null', 'null', null],
  ])('%s → -32600', async (_what, line, id) => {
    const a = await client();
    const r = await a.rawResponse(`${line}\n`);
    expect(r.error?.code).toBe(-32600);
    expect(r.id).toBe(id);
    await bystanderWorks();
  });

  it('an unknown method → -32601 with the id', async () => {
    const a = await client();
    const r = await a.request('no.such.method', {}, 'u1');
    expect(r.error?.code).toBe(-32601);
    expect(r.id).toBe('u1');
    expect(r.error?.message).toContain('no.such.method');
  });

  it('positional params (an array) → -32602', async () => {
    const a = await client();
    const r = await a.rawResponse('{"jsonrpc":"2.0","id":"p1","method":"exec","params":["echo hi"]}\n');
    expect(r.error?.code).toBe(-32602);
    expect(r.id).toBe('p1');
  });
});

describe('methods', () => {
  it('tools.list describes exec and process with JSON Schema', async () => {
    const a = await client();
    const r = await a.call('tools.list');
    expect(Array.isArray(r)).toBe(true);
    const tools = r;
    expect(tools.map((t: any) => t.name).sort()).toEqual(['exec', 'process']);
    for (const t of tools) {
      expect(typeof t.description).toBe('string');
      expect(t.inputSchema.type).toBe('object');
    }
    const exec = tools.find((t: any) => t.name === 'exec');
    expect(exec.inputSchema.required).toEqual(['command']);
  });

  it('the tool method refuses an unknown tool as invalid with its path', async () => {
    const a = await client();
    const r = await a.request('tool', { tool: 'rm-rf', command: 'true' });
    expect(r.error?.code).toBe(-32602);
    expect(r.error?.data).toMatchObject({ kind: 'invalid', path: ['tool'] });
  });
});

describe('notifications and batches', () => {
  it('a notification gets no response, whatever it is, but it is carried out', async () => {
    const a = await client();
    const s = scopes.next('notif', a);
    await expectNoResponse(a, '{"jsonrpc":"2.0","method":"daemon.status"}\n');
    await expectNoResponse(a, '{"jsonrpc":"2.0","method":"no.such.method"}\n');
    await expectNoResponse(a, '{"jsonrpc":"2.0","method":"process","params":{"action":"explode"}}\n');
    await expectNoResponse(a, `${JSON.stringify({ jsonrpc: '2.0', method: 'exec', params: { command: 'echo by-notification', scope: s.scope } })}\n`);
    const listed = await waitFor(async () => (await s.list()).find((x) => x.command === 'echo by-notification'), { what: 'the notified exec' });
    expect(listed).toBeDefined();
  });

  it('a batch answers with an array of the responses to its requests', async () => {
    const a = await client();
    const batch = [
      { jsonrpc: '2.0', id: 'b1', method: 'daemon.status' },
      { jsonrpc: '2.0', id: 'b2', method: 'no.such.method' },
      { jsonrpc: '2.0', method: 'daemon.status' },
      { jsonrpc: '2.0', id: 'b3', method: 'process', params: { action: 'list', scope: 'batch-scope' } },
    ];
    const r = (await a.rawResponse(`${JSON.stringify(batch)}\n`)) as unknown as RpcResponse[];
    expect(Array.isArray(r)).toBe(true);
    expect(r.map((x) => x.id).sort()).toEqual(['b1', 'b2', 'b3']);
    const byId = new Map(r.map((x) => [x.id, x]));
    expect(byId.get('b1')!.result.pid).toBe(d.proc.pid);
    expect(byId.get('b2')!.error!.code).toBe(-32601);
    expect(byId.get('b3')!.result.sessions).toEqual([]);
  });

  it('a batch of one answers with an array of one', async () => {
    const a = await client();
    const r = (await a.rawResponse('[{"jsonrpc":"2.0","id":"solo","method":"daemon.status"}]\n')) as unknown as RpcResponse[];
    expect(Array.isArray(r)).toBe(true);
    expect(r).toHaveLength(1);
    expect(r[0].id).toBe('solo');
  });

  it('an empty batch → a single -32600 error', async () => {
    const a = await client();
    const r = await a.rawResponse('[]\n');
    expect(Array.isArray(r)).toBe(false);
    expect(r.error?.code).toBe(-32600);
    expect(r.id).toBeNull();
  });

  it('a batch of invalid entries → an array of -32600 errors, one per entry', async () => {
    const a = await client();
    const r = (await a.rawResponse('[1,2,3]\n')) as unknown as RpcResponse[];
    expect(Array.isArray(r)).toBe(true);
    expect(r).toHaveLength(3);
    for (const x of r) {
      expect(x.error?.code).toBe(-32600);
      expect(x.id).toBeNull();
    }
  });

  it('a batch of notifications only gets no response', async () => {
    const a = await client();
    await expectNoResponse(a, '[{"jsonrpc":"2.0","method":"daemon.status"},{"jsonrpc":"2.0","method":"nope"}]\n');
  });
});

describe('framing', () => {
  it('a request split across writes (even inside a UTF-8 character) and CRLF endings work', async () => {
    const a = await client();
    const s = scopes.next('split', a);
    const line = Buffer.from(`${JSON.stringify({ jsonrpc: '2.0', id: 's1', method: 'exec', params: { command: 'echo "€uro"', scope: s.scope } })}\r\n`);
    const cut = line.indexOf(Buffer.from('€')) + 1;
    const before = a.unmatched.length;
    a.sendRaw(line.subarray(0, cut));
    // Not a synchronisation point: only makes it likely that the daemon reads the halves apart.
    await new Promise((r) => setTimeout(r, 50));
    a.sendRaw(line.subarray(cut));
    await a.until(() => a.unmatched.length > before);
    const r = a.unmatched[before];
    expect(r.id).toBe('s1');
    expect(r.result.output).toBe('€uro\n');
  });

  it('several requests in one write each get their response', async () => {
    const a = await client();
    const lines = [1, 2, 3].map((i) => JSON.stringify({ jsonrpc: '2.0', id: `m${i}`, method: 'daemon.status' })).join('\n');
    const before = a.unmatched.length;
    a.sendRaw(`${lines}\n`);
    await a.until(() => a.unmatched.length >= before + 3);
    expect(a.unmatched.slice(before).map((x) => x.id).sort()).toEqual(['m1', 'm2', 'm3']);
  });

  it('a frame just under the limit is accepted', async () => {
    const a = await client();
    const s = scopes.next('fits', a);
    const head = { jsonrpc: '2.0', id: 'big-ok', method: 'exec', params: { command: 'echo ', scope: s.scope } };
    const pad = 'x'.repeat(MAX_FRAME - Buffer.byteLength(JSON.stringify(head)) - 40);
    head.params.command = `echo ${pad} >/dev/null; echo fits`;
    const line = JSON.stringify(head);
    expect(Buffer.byteLength(line)).toBeLessThan(MAX_FRAME);
    expect(Buffer.byteLength(line)).toBeGreaterThan(MAX_FRAME - 64);
    const r = await a.rawResponse(`${line}\n`);
    expect(r.id).toBe('big-ok');
    expect(r.result.output).toBe('fits\n');
    expect(a.closed).toBe(false);
  });

  it('a frame over PROCCTL_MAX_FRAME_BYTES → -32600 and that connection closes; others keep working', async () => {
    const a = await client();
    const line = JSON.stringify({ jsonrpc: '2.0', id: 'big', method: 'exec', params: { command: `echo ${'y'.repeat(MAX_FRAME)}` } });
    const r = await a.rawResponse(`${line}\n`);
    expect(r.error?.code).toBe(-32600);
    await a.until(() => a.closed, 10_000);
    expect(a.closed).toBe(true);
    await bystanderWorks();
  });

  it('deeply nested JSON within the frame limit is refused, not a crash', async () => {
    const a = await client();
    const depth = Math.floor((MAX_FRAME - 8) / 2);
    const r = await a.rawResponse(`${'['.repeat(depth)}${']'.repeat(depth)}\n`);
    expect([-32700, -32600]).toContain(Array.isArray(r) ? (r as any)[0].error?.code : r.error?.code);
    const nested = `{"jsonrpc":"2.0","id":"deep","method":"exec","params":{"command":"true","env":${'{"a":'.repeat(600)}1${'}'.repeat(600)}}}`;
    const r2 = await a.rawResponse(`${nested}\n`);
    expect(r2.id).toBe('deep');
    expect(r2.error?.code).toBe(-32602);
    await bystanderWorks();
  });

  it('an endless frame without a newline is cut off the same way', async () => {
    const a = await client();
    const chunk = 'z'.repeat(1024);
    for (let i = 0; i < 8 && !a.closed; i++) a.sendRaw(chunk);
    await a.until(() => a.closed, 10_000);
    expect(a.unmatched[0]?.error?.code).toBe(-32600);
    await bystanderWorks();
  });
});

describe('cancellation', () => {
  it('$/cancelRequest for a pending foreground exec ends its session with reason "cancelled"', async () => {
    const a = await client();
    const s = scopes.next('cancel', a);
    const pending = s.request('exec', { command: 'sleep 600 & wait', yieldMs: 110_000 }, 'cx1');
    const running = await waitFor(async () => (await s.list())[0], { what: 'the session to start' });
    scopes.track(running.pid);
    a.sendRaw('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"cx1"}}\n');
    const r = await within(pending, 15_000, 'the cancelled exec to answer');
    if (r.result) {
      expect(r.result.status).toBe('failed');
      expect(r.result.reason).toBe('cancelled');
    }
    const ended = await s.waitEnded(running.sessionId);
    expect(ended.status).toBe('failed');
    expect(ended.reason).toBe('cancelled');
    expect(groupMembers(running.pid)).toEqual([]);
    // Cancelling again, or an id that is not pending, is harmless.
    const again = await a.request('$/cancelRequest', { id: 'cx1' });
    expect(again.error).toBeUndefined();
    await expectNoResponse(a, '{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"nothing-pending"}}\n');
    await bystanderWorks();
  });

  it('closing the connection during a foreground exec cancels it, but not its backgrounded sessions', async () => {
    const a = await client();
    const s = scopes.next('close', a);
    const watcher = new Scoped(b, s.scope);
    const bgSession = await s.exec({ command: 'sleep 600', background: true });
    scopes.track(bgSession.pid);
    void s.request('exec', { command: 'sleep 600 & wait', yieldMs: 110_000 });
    const fg = await waitFor(async () => (await watcher.list()).find((x) => x.sessionId !== bgSession.sessionId), { what: 'the foreground session' });
    scopes.track(fg.pid);
    a.close();
    const ended = await watcher.waitEnded(fg.sessionId);
    expect(ended.status).toBe('failed');
    expect(ended.reason).toBe('cancelled');
    expect(groupMembers(fg.pid)).toEqual([]);
    const still = (await watcher.list()).find((x) => x.sessionId === bgSession.sessionId);
    expect(still.status).toBe('running');
    expect(alive(bgSession.pid)).toBe(true);
    await watcher.process({ action: 'kill', sessionId: bgSession.sessionId });
  });

  it('a connection cannot cancel another connection\'s request with the same id', async () => {
    const a = await client();
    const other = await client();
    const s = scopes.next('xcancel', a);
    const pending = s.request('exec', { command: 'sleep 600', yieldMs: 110_000 }, 'same-id');
    const running = await waitFor(async () => (await s.list())[0], { what: 'the session to start' });
    scopes.track(running.pid);
    other.sendRaw('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"same-id"}}\n');
    // The other connection's own request answering means it handled the cancel first.
    await other.request('daemon.status');
    expect((await s.list())[0].status).toBe('running');
    a.sendRaw('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"same-id"}}\n');
    await within(pending, 15_000, 'the cancelled exec to answer');
    expect((await s.waitEnded(running.sessionId)).reason).toBe('cancelled');
  });

  it('cancelling a pending poll only ends the wait', async () => {
    const a = await client();
    const s = scopes.next('cpoll', a);
    const r = await s.exec({ command: 'cat', background: true });
    scopes.track(r.pid);
    const pending = s.request('process', { action: 'poll', sessionId: r.sessionId, timeout: 110_000 }, 'px1');
    a.sendRaw('{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"px1"}}\n');
    const p = await within(pending, 15_000, 'the cancelled poll to answer');
    if (p.result) expect(p.result.status).toBe('running');
    expect((await s.list())[0].status).toBe('running');
    await s.process({ action: 'write', sessionId: r.sessionId, data: 'after-cancel\n', eof: true });
    const { last, output } = await s.pollUntilEnded(r.sessionId);
    expect(last.status).toBe('completed');
    expect(output).toBe('after-cancel\n');
  });
});

describe('the bystander', () => {
  it('its exec stayed pending through everything above and still completes', async () => {
    const other = await client();
    await new Scoped(other, bystander.scope).process({ action: 'write', sessionId: (await bystander.list()).find((x) => x.pid === bystanderPid).sessionId, data: 'done\n' });
    const r = await within(pendingExec, 15_000, 'the bystander exec');
    bystanderDone = true;
    expect(r.status).toBe('completed');
    expect(r.output).toBe('got-done\n');
  });
});
