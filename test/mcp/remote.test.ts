import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROCCTL, startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { findSshd, startSshd, type TestSshd } from '../remote/sshd.js';

const { sshd, missing } = findSshd();
if (missing) console.warn(`skipping procctl mcp --host: ${missing}`);

let d: TestDaemon;
let c: TestClient;
let s: TestSshd;

beforeAll(async () => {
  if (!sshd) return;
  d = await startDaemon();
  c = await d.client();
  s = await startSshd(sshd, d.socket);
});
afterAll(async () => {
  c?.close();
  await s?.stop();
  await stopAllDaemons();
});

const mcpOver = (key: Parameters<TestSshd['sshCommand']>[0]) =>
  new StdioClientTransport({
    command: process.execPath,
    args: [PROCCTL, '--host', s.url, 'mcp'],
    env: { ...(process.env as Record<string, string>), PROCCTL_SSH_COMMAND: s.sshCommand(key) },
    stderr: 'pipe',
  });

describe.skipIf(!sshd)('procctl mcp --host ssh://', () => {
  it('serves the tools of the daemon on the other host', async () => {
    const client = new Client({ name: 't', version: '1' });
    await client.connect(mcpOver('good'));
    try {
      const r = (await client.callTool({ name: 'exec', arguments: { command: 'echo over-ssh' } })) as any;
      expect(r.structuredContent).toMatchObject({ status: 'completed', output: 'over-ssh\n' });
      // It ran in the daemon behind sshd.
      const { sessions } = await c.process({ action: 'list' });
      expect(sessions.map((x: any) => x.sessionId)).toContain(r.structuredContent.sessionId);
    } finally {
      await client.close();
    }
  });

  it('starts no daemon there or here when the far one is not running: a call says why', async () => {
    const transport = mcpOver('nodaemon');
    let said = '';
    transport.stderr?.on('data', (b: Buffer) => (said += b.toString()));
    const client = new Client({ name: 't', version: '1' });
    try {
      // ssh connects before the far side can say its daemon is missing: the server may be up, or
      // may already have ended with the reason.
      await client.connect(transport);
      const r = (await client.callTool({ name: 'exec', arguments: { command: 'echo never' } })) as any;
      expect(r.isError).toBe(true);
      expect(r.content[0].text).toMatch(/procctld/);
    } catch (err) {
      expect(`${(err as Error).message}\n${said}`).toMatch(/procctld|closed/i);
    } finally {
      await client.close();
    }
    expect(said).not.toMatch(/started procctld/);
  });
});
