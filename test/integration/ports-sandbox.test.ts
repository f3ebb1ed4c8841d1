import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startDaemon, waitFor, type TestDaemon } from '../helpers/daemon.js';
import { Scoped } from '../helpers/session.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * A sandboxed session without network has a network namespace of its own (only loopback): the
 * port its server listens on is in that namespace's table, not the host's, and is shown all the same.
 */
const scratch = scratchRoot('procctl-ports-sb-');
const sessions = new Set<string>();
let d: TestDaemon;
let s: Scoped;

beforeAll(async () => {
  if (SKIP_SANDBOX) return;
  d = await startDaemon({ config: { sandbox: { mode: 'workspace-write', workspaces: [scratch.root] } } });
  s = new Scoped(await d.client(), 'sandboxed');
});

afterAll(async () => {
  await d?.stop();
  killMarked(sessions);
  scratch.cleanup();
});

describe.skipIf(SKIP_SANDBOX)('ports of a sandboxed session (SPEC §20)', () => {
  it("are read from the session's own network namespace", async () => {
    const r = await s.exec({
      command: `exec node -e "const s = require('net').createServer().listen(0, '127.0.0.1', () => console.log('port', s.address().port))"`,
      background: true,
      workdir: scratch.root,
    });
    sessions.add(r.sessionId);
    expect(r.status).toBe('running');
    const port = Number((await waitFor(async () => /port (\d+)/.exec((await s.log(r.sessionId, { offset: 0 })).output), { what: 'the server to print its port' }))[1]);
    const p = await waitFor(async () => {
      const x = await s.process({ action: 'poll', sessionId: r.sessionId });
      return x.ports?.length ? x : undefined;
    }, { what: 'poll to show the port' });
    expect(p.ports).toEqual([{ address: '127.0.0.1', port }]);
    // Not in the host's table: the socket lives in the sandbox's own namespace.
    const hex = port.toString(16).toUpperCase().padStart(4, '0');
    const hostRows = readFileSync('/proc/self/net/tcp', 'latin1').split('\n').filter((l) => l.includes(`:${hex} `) && / 0A /.test(l));
    expect(hostRows).toEqual([]);
    await s.process({ action: 'kill', sessionId: r.sessionId });
  });
});
