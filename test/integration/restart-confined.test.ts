import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, startDaemon, stopAllDaemons, waitFor } from '../helpers/daemon.js';
import { operator, restartAndWait } from '../helpers/restart.js';
import { Scoped } from '../helpers/session.js';
import { hostScratch, killMarked, NO_CURL, SKIP_SANDBOX } from './sandbox-support.js';

/**
 * A planned restart (SPEC §19) carries confined sessions: a sandboxed job's own channel and the
 * network-by-name proxy's port go on in the new image, with the policy the session started with.
 * Real bwrap, a real proxy, a real HTTP server on the host; skipped (saying why) without them.
 */

if (NO_CURL && !SKIP_SANDBOX) console.warn(`skipping the confined restart tests: ${NO_CURL}`);
const SKIP = SKIP_SANDBOX || NO_CURL !== undefined;

const base = hostScratch('procctl-carry-');
const workspace = join(base, 'workspace');
mkdirSync(workspace);
const sessions = new Set<string>();
let server: Server;
let port = 0;
const NODE = process.execPath;
const addonCopy = join(base, 'procctl.node');

beforeAll(async () => {
  if (SKIP) return;
  copyFileSync((createRequire(import.meta.url)('node-gyp-build') as { resolve(dir: string): string }).resolve(ROOT), addonCopy);
  server = createServer((q, r) => r.end(`hello ${q.url?.slice(1)}\n`));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  port = (server.address() as { port: number }).port;
});

afterEach(async () => {
  await stopAllDaemons();
  killMarked(sessions);
});

afterAll(() => {
  server?.close();
  rmSync(base, { recursive: true, force: true });
});

// curl goes to 127.0.0.1 directly when NO_PROXY names it (the job's own loopback); these ask the proxy.
const CURL = 'curl -sS -m 20 --noproxy ""';

/** A node one-liner that asks the session's channel for a connection and sends it one checkpoint. */
const checkpoint = (name: string) =>
  `${NODE} -e 'const fd=Number(process.env.PROCCTL_SOCKET.slice(3));const s=new (require("net").Socket)({fd:require(process.argv[1]).receiveConnection(fd,10000)});s.write(JSON.stringify({jsonrpc:"2.0",id:1,method:"checkpoint",params:{name:process.argv[2]}})+"\\n");s.on("data",b=>{console.log(String(b).includes("\\"result\\"")?"checkpoint="+process.argv[2]:String(b));s.end();})' ${addonCopy} ${name}`;

describe.skipIf(SKIP_SANDBOX)('a planned restart carries review sessions', () => {
  it('what a review session wrote before and after the restart is held, listed and applied once it ends', async () => {
    const ws = join(base, 'review-ws');
    mkdirSync(ws);
    const d = await startDaemon({ config: { sandbox: { mode: 'workspace-write', workspaces: [ws] } } });
    const s = new Scoped(await d.client(), 'review');
    const job = await s.exec({ command: 'echo one > before.txt && echo wrote; read -r x; echo two > after.txt; echo "$x" >> before.txt', background: true, workdir: ws, changes: 'review' });
    sessions.add(job.sessionId);
    await s.waitOutput(job.sessionId, 'wrote');
    expect((await s.list()).find((x: any) => x.sessionId === job.sessionId).changes).toMatchObject({ state: 'running' });

    expect((await restartAndWait(d)).sessions).toBe(1);

    const s2 = new Scoped(await d.client(), 'review');
    expect((await s2.list()).find((x: any) => x.sessionId === job.sessionId).changes).toMatchObject({ state: 'running' });
    await s2.process({ action: 'write', sessionId: job.sessionId, data: 'three\n' });
    const { last } = await s2.pollUntilEnded(job.sessionId, 30_000);
    expect(last.exitCode).toBe(0);
    // The workspace is untouched until the changes are applied.
    expect(existsSync(join(ws, 'before.txt'))).toBe(false);
    await waitFor(async () => (await s2.list()).find((x: any) => x.sessionId === job.sessionId).changes?.state === 'pending', { what: 'the changes to be pending' });
    const listed = await s2.process({ action: 'changes', sessionId: job.sessionId, stat: true });
    expect(listed.files.map((f: any) => f.path).sort()).toEqual(['after.txt', 'before.txt']);
    await s2.process({ action: 'apply', sessionId: job.sessionId });
    expect(readFileSync(join(ws, 'before.txt'), 'utf8')).toBe('one\nthree\n');
    expect(readFileSync(join(ws, 'after.txt'), 'utf8')).toBe('two\n');
  });
});

describe.skipIf(SKIP)('a planned restart carries sandboxed sessions', () => {
  it('network by name and the job\'s own channel keep working after the restart, with the policy the session started with', async () => {
    const d = await startDaemon({
      config: { sandbox: { mode: 'workspace-write', workspaces: [base], network: { allow: ['127.0.0.1'], deny: [] } } },
    });
    const s = new Scoped(await d.client(), 'confined');
    // Runs each line it is sent: the same job, before and after the restart.
    const job = await s.exec({ command: 'while read -r l; do eval "$l"; done', background: true, workdir: workspace });
    sessions.add(job.sessionId);
    await s.process({ action: 'write', sessionId: job.sessionId, data: `${CURL} http://127.0.0.1:${port}/before\n` });
    await s.waitOutput(job.sessionId, 'hello before');
    await s.process({ action: 'write', sessionId: job.sessionId, data: `${checkpoint('one')}\n` });
    await s.waitOutput(job.sessionId, 'checkpoint=one');

    const answer = await restartAndWait(d);
    expect(answer.sessions).toBe(1);

    let s2 = new Scoped(await d.client(), 'confined');
    const listed = (await s2.list()).find((x: any) => x.sessionId === job.sessionId);
    expect(['running', 'waiting_input']).toContain(listed.status);
    expect(listed.pid).toBe(job.pid);
    await s2.process({ action: 'write', sessionId: job.sessionId, data: `${CURL} http://127.0.0.1:${port}/after\n` });
    await s2.waitOutput(job.sessionId, 'hello after');
    // The policy goes on: a host it does not allow is refused and counted on the session.
    await s2.process({ action: 'write', sessionId: job.sessionId, data: `${CURL} http://127.0.0.2:${port}/no; echo\n` });
    await s2.waitOutput(job.sessionId, 'blocked 127.0.0.2: not in sandbox.network.allow');
    await waitFor(async () => (await s2.list()).find((x: any) => x.sessionId === job.sessionId).network?.denied?.[0]?.host === '127.0.0.2', { what: 'the refusal to be counted' });
    // Again: what this image adopted is handed on as well.
    expect((await restartAndWait(d, 1)).sessions).toBe(1);
    s2 = new Scoped(await d.client(), 'confined');
    await s2.process({ action: 'write', sessionId: job.sessionId, data: `${CURL} http://127.0.0.1:${port}/again\n` });
    await s2.waitOutput(job.sessionId, 'hello again');
    await s2.process({ action: 'write', sessionId: job.sessionId, data: `${checkpoint('two')}\n` });
    await s2.waitOutput(job.sessionId, 'checkpoint=two');
    expect((await s2.list()).find((x: any) => x.sessionId === job.sessionId).checkpoint).toMatchObject({ name: 'two' });
    // And it ends as a sandboxed job does: its own exit status.
    await s2.process({ action: 'write', sessionId: job.sessionId, data: 'exit 4\n' });
    const { last } = await s2.pollUntilEnded(job.sessionId, 30_000);
    expect(last.exitCode).toBe(4);
  }, 180_000);
});
