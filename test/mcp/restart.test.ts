import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { PROCCTL, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { killLeftovers } from '../helpers/procs.js';
import { TestClient } from '../helpers/rpc.js';

/**
 * `procctl mcp` rides through a planned restart (SPEC §19): a tool call refused `restarting`, or
 * whose connection the restart closed, is sent again on a new connection, and the model sees
 * its answer, not an error. Driven over stdio by the SDK's own client, against a real restart.
 */

const pids = new Set<number>();
const clients: Client[] = [];

afterEach(async () => {
  await Promise.all(clients.splice(0).map((c) => c.close()));
  await stopAllDaemons();
  killLeftovers(pids);
});

type Result = { content: { type: string; text: string }[]; structuredContent?: any; isError?: boolean };

async function mcp(d: TestDaemon): Promise<{ call: (name: 'exec' | 'process', args: Record<string, unknown>) => Promise<Result>; stderr: () => string }> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [PROCCTL, '--socket', d.socket, 'mcp'], env: process.env as Record<string, string>, stderr: 'pipe' });
  let err = '';
  transport.stderr?.on('data', (b: Buffer) => (err += b.toString()));
  const client = new Client({ name: 'procctl-restart-test', version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  clients.push(client);
  return { call: (name, args) => client.callTool({ name, arguments: args }) as Promise<Result>, stderr: () => err };
}

async function planned(d: TestDaemon): Promise<number> {
  const c = await TestClient.connect(d.socket);
  try {
    return (await c.call('daemon.status')).restarts.planned;
  } finally {
    c.close();
  }
}

describe('procctl mcp across a planned restart', () => {
  it('a wait in flight and the calls after it are answered by the new image, none as an error', async () => {
    const d = await startDaemon();
    const m = await mcp(d);
    const started = await m.call('exec', { command: 'sleep 6; echo finished', background: true });
    expect(started.isError, started.content[0]?.text).toBeFalsy();
    const id = started.structuredContent.sessionId as string;
    pids.add(started.structuredContent.pid);
    // In flight when the restart comes: the old image answers it restarting (or its connection closes), and it is sent again.
    const waiting = m.call('process', { action: 'wait', sessionIds: [id], timeout: 60_000 });
    const c = await TestClient.connect(d.socket);
    const asked = await c.request('daemon.restart', { scope: '*', approverToken: readFileSync(`${d.socket}.approver`, 'utf8').trim() });
    c.close();
    expect(asked.result?.sessions).toBe(1);
    const waited = await waiting;
    expect(waited.isError, waited.content[0]?.text).toBeFalsy();
    expect(waited.structuredContent.done).toEqual([id]);
    await waitFor(async () => (await planned(d)) === 1, { what: 'the new image to serve', timeoutMs: 30_000 });
    const log = await m.call('process', { action: 'log', sessionId: id });
    expect(log.isError, log.content[0]?.text).toBeFalsy();
    expect(log.structuredContent.output).toBe('finished');
    const fresh = await m.call('exec', { command: 'echo after' });
    expect(fresh.structuredContent.output).toBe('after\n');
  }, 120_000);
});
