import { mkdtempSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { waitFor } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { cliVoice, RPC, type Call } from '../../src/schema/voice.js';
import { cli, cliDaemon, type CliDaemon } from './run.js';

let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ run, c } = x), { config: { approvals: { rules: [{ match: 'needs-ok', action: 'ask', reason: 'touches production' }] } } });

/** What a person must never be told to type: the tools' parameter syntax. */
const RPC_WORDS = /process \{|action:|sessionId:|input:\{|ifRunning:|pty:true|offset\/limit|workdir/;

/** A running session of the default scope, started directly (only the command under test pays a CLI start). */
async function running(command = 'sleep 60', extra: Record<string, unknown> = {}): Promise<string> {
  return (await c.exec({ command, background: true, ...extra })).sessionId;
}

async function waitingForInput(): Promise<string> {
  const id = await running("printf 'Continue? [y/N] '; read a; echo got=$a");
  await waitFor(async () => (await c.process({ action: 'list' })).sessions.find((s: any) => s.sessionId === id)?.status === 'waiting_input', {
    what: 'the session to wait for input',
  });
  return id;
}

const approvalPending = async () => (await c.exec({ command: 'echo needs-ok' })).sessionId;

/** Each case: how to get there, the CLI command, and the procctl commands its output must name. */
const CASES: [string, () => Promise<string>, (id: string) => string[], (id: string) => string[]][] = [
  ['exec --bg', async () => '', () => ['exec', '--bg', '--', 'sleep 60'], () => ['procctl poll ', 'procctl kill ', 'procctl write ']],
  ['poll of a running session', () => running(), (id) => ['poll', id], (id) => [`\`procctl poll ${id}\``]],
  ['poll of a session waiting for input', waitingForInput, (id) => ['poll', id], (id) => [`procctl resume ${id} --yes`, `procctl resume ${id} --no`, `procctl resume ${id} --eof`]],
  ['poll of no such session', async () => 'nosuchid', (id) => ['poll', id], () => ['`procctl ps`', 'pass --scope NAME']],
  ['log -f of no such session', async () => 'nosuchid', (id) => ['log', '-f', id], () => ['`procctl ps`']],
  ['poll of no such session in another scope', async () => 'nosuchid', (id) => ['--scope', 'team', 'poll', id], () => ['`procctl --scope team ps`']],
  ['clear of a running session', () => running(), (id) => ['clear', id], (id) => [`procctl kill ${id}`, `procctl rm ${id}`]],
  ['resume of a session that asks nothing', () => running(), (id) => ['resume', id, '--yes'], (id) => [`procctl poll ${id}`]],
  ['send-keys to a session without a terminal', () => running(), (id) => ['send-keys', id, 'Enter'], (id) => [`procctl write ${id} DATA`, `procctl signal ${id} SIGINT`, '--pty']],
  ['exec --key of a key already running, --if-running reject', () => running('sleep 60', { key: 'k1' }), () => ['exec', '--bg', '--key', 'k1', '--if-running', 'reject', '--', 'sleep 1'], () => ['--if-running replace']],
  ['log of more lines than it shows', async () => (await c.exec({ command: 'seq 300' })).sessionId, (id) => ['log', id], (id) => [`procctl log ${id} --offset N --limit N`]],
  ['exec --cwd of a directory that does not exist', async () => '', () => ['exec', '--cwd', '/no/such/dir', '--', 'true'], () => ['`--cwd /no/such/dir`']],
  ['exec that needs approval', async () => '', () => ['exec', '--', 'echo needs-ok'], () => ['--yes`', '--no`']],
  ['poll of a session waiting for approval', approvalPending, (id) => ['poll', id], (id) => [`procctl resume ${id} --yes`, `procctl resume ${id} --no`]],
  ['clear of a session waiting for approval', approvalPending, (id) => ['clear', id], (id) => [`procctl resume ${id} --no`, `procctl rm ${id}`]],
  ['write to a session waiting for approval', approvalPending, (id) => ['write', id, 'x'], (id) => [`procctl resume ${id} --yes`, `procctl resume ${id} --no`]],
];

describe('what the CLI tells a person names procctl commands, never tool parameters', () => {
  it.each(CASES)('%s', async (_what, setup, args, names) => {
    const id = await setup();
    const r = await run(args(id));
    const said = r.stdout + r.stderr;
    for (const name of names(id)) expect(said).toContain(name);
    expect(said).not.toMatch(RPC_WORDS);
  });

  it('procctl tool prints the text a model gets, in the tools’ own words', async () => {
    const r = await run(['tool', '{"tool":"process","action":"poll","sessionId":"nosuchid"}']);
    expect(r.stderr).toContain('process {action:"list"}');
  });

  it('a model gets the same texts in the tools’ words', async () => {
    const id = await waitingForInput();
    const text = (await c.process({ action: 'poll', sessionId: id })).text as string;
    expect(text).toContain(`process {action:"resume", sessionId:"${id}", input:{confirm:true}}`);
    expect(text).not.toContain('procctl resume');
  });
});

describe('the two voices', () => {
  const calls: [Call, string, string][] = [
    [{ action: 'list' }, 'process {action:"list"}', '`procctl ps`'],
    [{ action: 'poll', sessionId: 'ab' }, 'process {action:"poll", sessionId:"ab"}', '`procctl poll ab`'],
    [{ action: 'poll', sessionId: 'ab', timeout: 5000 }, 'process {action:"poll", sessionId:"ab", timeout:5000}', '`procctl poll ab --wait 5000`'],
    [{ action: 'log', sessionId: 'ab' }, 'process {action:"log", sessionId:"ab"}', '`procctl log ab`'],
    [{ action: 'remove', sessionId: 'ab' }, 'process {action:"remove", sessionId:"ab"}', '`procctl rm ab`'],
    [{ action: 'write', sessionId: 'ab', eof: true }, 'process {action:"write", sessionId:"ab", eof:true}', '`procctl write ab --eof`'],
    [{ action: 'write', sessionId: 'ab' }, 'process {action:"write", sessionId:"ab", data:"..."}', '`procctl write ab DATA`'],
    [{ action: 'signal', sessionId: 'ab' }, 'process {action:"signal", sessionId:"ab", signal:"..."}', '`procctl signal ab SIGNAL`'],
    [{ action: 'signal', sessionId: 'ab', signal: 'SIGINT' }, 'process {action:"signal", sessionId:"ab", signal:"SIGINT"}', '`procctl signal ab SIGINT`'],
    [{ action: 'resume', sessionId: 'ab', input: { confirm: false } }, 'process {action:"resume", sessionId:"ab", input:{confirm:false}}', '`procctl resume ab --no`'],
    [{ action: 'resume', sessionId: 'ab', input: { text: "it's" } }, 'process {action:"resume", sessionId:"ab", input:{text:"it\'s"}}', "`procctl resume ab --text 'it'\\''s'`"],
    [{ action: 'resume', sessionId: 'ab', input: { text: '<number>' } }, 'process {action:"resume", sessionId:"ab", input:{text:"<number>"}}', '`procctl resume ab --text NUMBER`'],
  ];
  it.each(calls)('%j', (call, rpc, cli) => {
    expect(RPC.call(call)).toBe(rpc);
    expect(cliVoice().call(call)).toBe(cli);
  });

  it('a voice the daemon does not know is invalid params naming the field, as an older daemon refuses any voice', async () => {
    const r = await c.request('process', { action: 'list', voice: 'shouty' });
    expect(r.error).toMatchObject({ code: -32602, data: { kind: 'invalid', path: ['voice'] } });
    expect(r.error?.message).toMatch(/voice must be "rpc" or "cli"/);
  });

  it('name the scope when it is not the default one', () => {
    expect(cliVoice('team a').call({ action: 'list' })).toBe("`procctl --scope 'team a' ps`");
  });
});

describe('a daemon from before voice', () => {
  it('refuses voice as an unknown parameter; the CLI asks again without it', async () => {
    // Answers as an older procctld does: voice is an unknown parameter; without it, an empty list.
    const socket = join(mkdtempSync(join(tmpdir(), 'procctl-old-')), 'old.sock');
    const asked: unknown[] = [];
    const server = createServer((conn) => {
      let buffered = '';
      conn.setEncoding('utf8').on('data', (chunk: string) => {
        buffered += chunk;
        for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
          const req = JSON.parse(buffered.slice(0, nl));
          buffered = buffered.slice(nl + 1);
          asked.push(req.params);
          const reply =
            'voice' in req.params
              ? { error: { code: -32602, message: 'invalid process params: voice: unknown parameter "voice"', data: { kind: 'invalid', path: ['voice'] } } }
              : { result: { sessions: [], total: 0, offset: 0, text: 'No sessions.' } };
          conn.write(`${JSON.stringify({ jsonrpc: '2.0', id: req.id, ...reply })}\n`);
        }
      });
    });
    await new Promise<void>((ok) => server.listen(socket, ok));
    try {
      const r = await cli(['--socket', socket, 'ps']);
      expect(r).toMatchObject({ code: 0, stdout: 'No sessions.\n' });
      expect(asked).toEqual([
        { action: 'list', limit: 50, voice: 'cli' },
        { action: 'list', limit: 50 },
      ]);
    } finally {
      server.close();
    }
  });
});
