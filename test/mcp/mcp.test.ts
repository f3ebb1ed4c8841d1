import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport } from '@modelcontextprotocol/client/stdio';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { alive, PROCCTL, startDaemon, stopAllDaemons, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';

type Answer = { action: 'accept'; content: Record<string, unknown> } | { action: 'decline' } | { action: 'cancel' };

interface Connected {
  client: Client;
  stderr: () => string;
  asked: { message: string; requestedSchema: any }[];
  close: () => Promise<void>;
}

let d: TestDaemon;
let rpc: TestClient;
const open = new Set<Connected>();

beforeAll(async () => {
  d = await startDaemon({
    config: { approvals: { rules: [{ match: '^echo needs-approval', action: 'ask', reason: 'a person should see this' }] } },
    env: { PROCCTL_KILL_GRACE_MS: '1000' },
  });
  rpc = await d.client();
});

afterEach(async () => {
  await Promise.all([...open].map((c) => c.close()));
});

afterAll(async () => {
  rpc?.close();
  await stopAllDaemons();
});

/**
 * `procctl mcp` driven by the SDK's own client over stdio. `answer`, when given, makes the client
 * declare elicitation and answer each question with it.
 */
/** The protocol era the client speaks: 2025's initialize (the SDK client's default), or the 2026-07-28 revision. */
type Era = 'legacy' | 'modern';
let era: Era = 'legacy';

async function connect(opts: { answer?: (asked: { message: string; requestedSchema: any }) => Answer; args?: string[]; env?: Record<string, string> } = {}): Promise<Connected> {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [PROCCTL, '--socket', d.socket, 'mcp', ...(opts.args ?? [])],
    env: { ...(process.env as Record<string, string>), ...opts.env },
    stderr: 'pipe',
  });
  let errText = '';
  transport.stderr?.on('data', (b: Buffer) => (errText += b.toString()));
  const client = new Client(
    { name: 'procctl-test', version: '1.0.0' },
    { capabilities: opts.answer ? { elicitation: { form: {} } } : {}, versionNegotiation: { mode: era === 'legacy' ? 'legacy' : { pin: '2026-07-28' } } },
  );
  const asked: Connected['asked'] = [];
  if (opts.answer) {
    const answer = opts.answer;
    client.setRequestHandler('elicitation/create', async (request) => {
      const params = request.params as { message: string; requestedSchema: any };
      asked.push(params);
      return answer(params);
    });
  }
  await client.connect(transport);
  const c: Connected = {
    client,
    stderr: () => errText,
    asked,
    close: async () => {
      open.delete(c);
      await client.close();
    },
  };
  open.add(c);
  return c;
}

const call = (c: Connected, name: 'exec' | 'process', args: Record<string, unknown>, extra: Parameters<Client['callTool']>[1] = {}) =>
  c.client.callTool({ name, arguments: args }, extra) as Promise<{ content: { type: string; text: string }[]; structuredContent?: any; isError?: boolean }>;

describe('procctl mcp', () => {
  it('lists exec and process with the schemas of tools.list, an output schema and honest annotations', async () => {
    const c = await connect();
    const { tools } = await c.client.listTools();
    const daemonTools = (await rpc.call('tools.list')) as { name: string; inputSchema: any }[];
    expect(tools.map((t) => t.name).sort()).toEqual(['exec', 'process']);
    for (const t of tools) {
      const theirs = daemonTools.find((x) => x.name === t.name)!;
      const strip = ({ $schema: _s, ...rest }: any) => rest;
      expect(strip(t.inputSchema), t.name).toEqual(strip(theirs.inputSchema));
      expect(t.outputSchema?.type).toBe('object');
    }
    const exec = tools.find((t) => t.name === 'exec')!;
    expect(exec.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true, openWorldHint: true });
  });

  it('answers a call with text and the whole result as structured content; an error is isError, and it keeps serving', async () => {
    const c = await connect();
    const r = await call(c, 'exec', { command: 'echo hello; exit 3' });
    expect(r.isError).toBeFalsy();
    expect(r.structuredContent).toMatchObject({ exitCode: 3, output: 'hello\n' });
    expect(r.content[0].text).toBe(r.structuredContent.text);

    const bad = await call(c, 'process', { action: 'poll', sessionId: 'nosuchid' });
    expect(bad.isError).toBe(true);
    expect(bad.content[0].text).toMatch(/not_found/);
    const invalid = await call(c, 'exec', { command: '' });
    expect(invalid.isError).toBe(true);

    const again = await call(c, 'process', { action: 'list' });
    expect(again.structuredContent.sessions.some((s: any) => s.sessionId === r.structuredContent.sessionId)).toBe(true);
  });

  it('sends progress during a foreground exec that carries a progressToken', async () => {
    const c = await connect();
    const seen: number[] = [];
    const r = await call(c, 'exec', { command: 'sleep 2.5; echo done' }, { onprogress: (p) => seen.push(p.progress) });
    expect(r.structuredContent.status).toBe('completed');
    expect(seen.length).toBeGreaterThan(0);
  });

  it('a waitFor exec shows progress until it is ready, saying what it waits for, then answers running with ready: true', async () => {
    const c = await connect();
    const seen: string[] = [];
    const r = await call(
      c,
      'exec',
      { command: 'sleep 2.5; echo "listening on 8080"; sleep 600', waitFor: { output: 'listening on \\d+' } },
      { onprogress: (p) => seen.push(String(p.message)) },
    );
    expect(r.structuredContent).toMatchObject({ status: 'running', ready: true });
    expect(r.content[0].text).toMatch(/^Ready: a line of output matches \/listening on \\d\+\/ \(/);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen[0]).toMatch(/^not ready after \d+ s: waiting until a line of output matches \/listening on \\d\+\/$/);
    await rpc.call('process', { action: 'kill', sessionId: r.structuredContent.sessionId });
  });

  it('notifications/cancelled cancels the exec as $/cancelRequest would: its session is stopped', async () => {
    const c = await connect();
    const ac = new AbortController();
    const started = call(c, 'exec', { command: 'echo started; sleep 600', name: 'to-cancel' }, { signal: ac.signal });
    let session: any;
    await waitFor(async () => {
      const list = (await rpc.call('process', { action: 'list' })) as { sessions: any[] };
      session = list.sessions.find((s) => s.name === 'to-cancel' && s.status === 'running');
      return session !== undefined;
    });
    ac.abort();
    await expect(started).rejects.toThrow();
    await waitFor(async () => ((await rpc.call('process', { action: 'poll', sessionId: session.sessionId })) as any).status === 'failed', {
      what: 'the cancelled session to end',
    });
    const p = (await rpc.call('process', { action: 'poll', sessionId: session.sessionId })) as any;
    expect(p.reason).toBe('cancelled');
    expect(alive(session.pid)).toBe(false);
  });

  describe.each(['legacy', 'modern'] as const)('elicitation (%s era)', (which) => {
    beforeAll(() => void (era = which));
    afterAll(() => void (era = 'legacy'));

    it('the client speaks the era under test', async () => {
      const c = await connect();
      const version = c.client.getNegotiatedProtocolVersion?.() ?? '';
      expect(version >= '2026-07-28', version).toBe(which === 'modern');
    });

    it('a question the command asks goes to the person; the answer reaches it once, and the call answers as exec', async () => {
      const c = await connect({ answer: (q) => ({ action: 'accept', content: { [Object.keys(q.requestedSchema.properties)[0]]: 'Ada' } }) });
      const r = await call(c, 'exec', { command: 'echo start; printf "Your name: "; read n; echo "hello $n"', yieldMs: 20_000 });
      expect(c.asked).toHaveLength(1);
      expect(c.asked[0].message).toContain('Your name:');
      expect(r.isError, JSON.stringify(r)).toBeFalsy();
      expect(r.structuredContent).toMatchObject({ status: 'completed', exitCode: 0 });
      expect(r.structuredContent.output).toContain('start');
      expect(r.structuredContent.output).toContain('hello Ada');
    });

    it('a yes/no question is a boolean; an approval is asked, and confirmed runs the command', async () => {
      const c = await connect({ answer: (q) => ({ action: 'accept', content: { [Object.keys(q.requestedSchema.properties)[0]]: true } }) });
      const r = await call(c, 'exec', { command: 'printf "Continue? [y/N] "; read a; echo "got $a"', yieldMs: 20_000 });
      expect(c.asked[0].requestedSchema.properties, JSON.stringify(c.asked[0])).toEqual({ confirm: expect.objectContaining({ type: 'boolean' }) });
      expect(r.structuredContent.output).toContain('got y');

      const a = await call(c, 'exec', { command: 'echo needs-approval ran' });
      expect(c.asked).toHaveLength(2);
      expect(c.asked[1].message).toContain('echo needs-approval ran');
      expect(c.asked[1].message).toContain('a person should see this');
      expect(a.structuredContent).toMatchObject({ status: 'completed', output: 'needs-approval ran\n' });
    });

    it('declined or cancelled: the question stays pending and the tool answers waiting_input / approval_required', async () => {
      for (const action of ['decline', 'cancel'] as const) {
        const c = await connect({ answer: () => ({ action }) });
        const r = await call(c, 'exec', { command: 'printf "Name? "; read n; echo "hi $n"', yieldMs: 20_000 });
        expect(r.structuredContent.status, action).toBe('waiting_input');
        expect(r.structuredContent.interrupt.kind).toBe('text');
        // Still pending: it can be answered as usual.
        const id = r.structuredContent.sessionId;
        const after = (await rpc.call('process', { action: 'poll', sessionId: id })) as any;
        expect(after.status).toBe('waiting_input');
        await rpc.call('process', { action: 'kill', sessionId: id });

        const a = await call(c, 'exec', { command: 'echo needs-approval no' });
        expect(a.structuredContent.status, action).toBe('approval_required');
        expect(((await rpc.call('process', { action: 'poll', sessionId: a.structuredContent.sessionId })) as any).status).toBe('approval_required');
        await c.close();
      }
    });

    it('without the capability, waiting_input and approval_required go to the model unchanged', async () => {
      const c = await connect();
      const r = await call(c, 'exec', { command: 'printf "Name? "; read n', yieldMs: 20_000 });
      expect(r.structuredContent.status).toBe('waiting_input');
      await rpc.call('process', { action: 'kill', sessionId: r.structuredContent.sessionId });
      const a = await call(c, 'exec', { command: 'echo needs-approval plain' });
      expect(a.structuredContent.status).toBe('approval_required');
      expect(a.content[0].text).toContain('resume');
      // The model answering its own approval through the tools is refused: only what the person says through elicitation carries the credential.
      const own = await call(c, 'process', { action: 'resume', sessionId: a.structuredContent.sessionId, input: { confirm: true } });
      expect(own.isError).toBe(true);
      expect(own.content[0].text).toContain('answered by a person');
      expect(((await rpc.call('process', { action: 'poll', sessionId: a.structuredContent.sessionId })) as any).status).toBe('approval_required');
    });
  });

  it('every hint a model is given runs as printed: each `process {…}` call in a text, made through MCP, reaches its session (a scope of its own)', async () => {
    const c = await connect({ env: { PROCCTL_SCOPE: 'newcomer' } });
    const hints: Record<string, unknown>[] = [];
    /** The `process {…}` calls a text names, parsed from the literal the tools' words use (keys bare, values JSON). */
    const collect = (text: string) => {
      const found: Record<string, unknown>[] = [];
      for (let at = text.indexOf('process {'); at !== -1; at = text.indexOf('process {', at + 1)) {
        let depth = 0;
        let end = at + 'process '.length;
        for (; end < text.length; end++) {
          if (text[end] === '{') depth++;
          else if (text[end] === '}' && --depth === 0) break;
        }
        const literal = text.slice(at + 'process '.length, end + 1);
        found.push(JSON.parse(literal.replace(/([{,]\s*)([A-Za-z_]\w*):/g, '$1"$2":')));
      }
      hints.push(...found);
      return found;
    };
    const bg = await call(c, 'exec', { command: 'while read line; do echo "got $line"; done', background: true });
    const id = bg.structuredContent.sessionId;
    expect(collect(bg.content[0].text).length, bg.content[0].text).toBeGreaterThanOrEqual(3);
    const asks = await call(c, 'exec', { command: 'printf "Continue? [y/N] "; read a; echo "said $a"', yieldMs: 30_000 });
    expect(asks.structuredContent.status).toBe('waiting_input');
    expect(collect(asks.content[0].text).length, asks.content[0].text).toBeGreaterThanOrEqual(2);
    const sleeper = await call(c, 'exec', { command: 'sleep 2', background: true });
    expect(collect((await call(c, 'process', { action: 'wait', sessionIds: [sleeper.structuredContent.sessionId], timeout: 50 })).content[0].text).length).toBe(1);
    expect(collect((await call(c, 'process', { action: 'poll', sessionId: 'nosuchid' })).content[0].text).length).toBe(1);
    const ids = new Set([id, asks.structuredContent.sessionId, sleeper.structuredContent.sessionId]);
    for (const h of hints) if (typeof h.sessionId === 'string') expect(ids, JSON.stringify(h)).toContain(h.sessionId);

    // Made as printed, placeholders filled as a model would: those that end a session last.
    const FILL: Record<string, string> = { data: 'x\n', signal: 'SIGCONT', text: 'y' };
    const fill = (h: Record<string, unknown>): Record<string, unknown> =>
      Object.fromEntries(
        Object.entries(h).map(([k, v]) => [k, v === '...' || v === '<number>' || v === '<secret>' ? (FILL[k] ?? 'x') : v && typeof v === 'object' && !Array.isArray(v) ? fill(v as Record<string, unknown>) : v]),
      );
    const ends = (h: Record<string, unknown>) => ['kill', 'remove', 'clear'].includes(String(h.action)) || JSON.stringify(h).includes('"confirm":false') || JSON.stringify(h).includes('"eof"');
    const unique = [...new Map(hints.map((h) => [JSON.stringify(h), h])).values()];
    // A wait waits for its sessions to end: made after the calls that end them.
    const waits = (h: Record<string, unknown>) => h.action === 'wait';
    for (const h of [...unique.filter((h) => !ends(h) && !waits(h)), ...unique.filter(ends), ...unique.filter(waits)]) {
      const t0 = Date.now();
      const r = await call(c, 'process', fill(h));
      if (process.env.HINTS_DEBUG) console.log(Date.now() - t0, 'ms', JSON.stringify(fill(h)));
      expect(r.content[0].text, JSON.stringify(h)).not.toMatch(/^(not_found|invalid)/);
    }
    const all = (await rpc.call('process', { action: 'list', scope: 'newcomer' })) as { sessions: { sessionId: string; status: string }[] };
    expect(all.sessions.filter((x) => x.status === 'running')).toEqual([]);
  });

  it('a normal close of the client (end of stdin) says nothing on stderr', async () => {
    const child = spawn(process.execPath, [PROCCTL, '--socket', d.socket, 'mcp'], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (b: string) => (out += b));
    child.stderr.setEncoding('utf8').on('data', (b: string) => (err += b));
    const exited = new Promise<number | null>((r) => child.on('close', (code) => r(code)));
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 't', version: '1' } } })}\n`);
    await waitFor(() => out.includes('"id":1') || undefined, { what: 'the initialize answer' });
    child.stdin.end();
    expect(await exited).toBe(0);
    expect(err).toBe('');
  });

  describe('the daemon', () => {
    it('--no-spawn with no daemon running still serves, each tool call saying why; without it one is started (detached) and said on stderr', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'procctl-mcp-'));
      const socket = join(dir, 'run', 'procctl.sock');
      const env = { XDG_CONFIG_HOME: join(dir, 'config'), PROCCTL_STATE_DIR: join(dir, 'state'), PROCCTL_LOG_LEVEL: 'warn' };
      let pid: number | undefined;
      try {
        const transport = new StdioClientTransport({
          command: process.execPath,
          args: [PROCCTL, '--socket', socket, 'mcp', '--no-spawn'],
          env: { ...(process.env as Record<string, string>), ...env },
          stderr: 'pipe',
        });
        let errText = '';
        transport.stderr?.on('data', (b: Buffer) => (errText += b.toString()));
        // Unreachable: it still answers initialize and tools/list, and each tool call says why (SPEC §13).
        const refused = new Client({ name: 't', version: '1' });
        await refused.connect(transport);
        await waitFor(() => /cannot reach procctld/.test(errText) || undefined, { what: 'the reason on stderr' });
        expect((await refused.listTools()).tools.map((t) => t.name).sort()).toEqual(['exec', 'process']);
        const call = (await refused.callTool({ name: 'exec', arguments: { command: 'true' } })) as any;
        expect(call.isError).toBe(true);
        expect(call.content[0].text).toContain('cannot reach procctld');
        expect(call.content[0].text).toContain('start it with');
        await refused.close();

        const spawning = new StdioClientTransport({
          command: process.execPath,
          args: [PROCCTL, '--socket', socket, 'mcp'],
          env: { ...(process.env as Record<string, string>), ...env },
          stderr: 'pipe',
        });
        let said = '';
        spawning.stderr?.on('data', (b: Buffer) => (said += b.toString()));
        const client = new Client({ name: 't', version: '1' });
        await client.connect(spawning);
        const m = /started procctld \(pid (\d+)/.exec(said);
        expect(m, said).not.toBeNull();
        pid = Number(m![1]);
        const r = (await client.callTool({ name: 'exec', arguments: { command: 'echo via-started' } })) as any;
        expect(r.structuredContent.output).toBe('via-started\n');
        await client.close();
        // Detached: it outlives the MCP server.
        expect(alive(pid)).toBe(true);
      } finally {
        if (pid !== undefined) {
          process.kill(pid, 'SIGTERM');
          await waitFor(() => !alive(pid!) || undefined, { what: 'the started daemon to exit' });
        }
        rmSync(dir, { recursive: true, force: true });
      }
    });

    it('--scope keeps its calls in that scope', async () => {
      const c = await connect({ args: ['--scope', 'mcp-scope'] });
      const r = await call(c, 'exec', { command: 'echo scoped' });
      const mine = (await rpc.call('process', { action: 'list', scope: 'mcp-scope' })) as { sessions: any[] };
      expect(mine.sessions.map((s) => s.sessionId)).toContain(r.structuredContent.sessionId);
      const other = (await rpc.call('process', { action: 'list' })) as { sessions: any[] };
      expect(other.sessions.map((s) => s.sessionId)).not.toContain(r.structuredContent.sessionId);
    });
  });
});
