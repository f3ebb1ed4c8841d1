import { describe, expect, it } from 'vitest';
import { PROCCTL, waitFor, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { cli, cliDaemon, type CliDaemon } from './run.js';

let d: TestDaemon;
let run: CliDaemon['run'];
let c: TestClient;
cliDaemon((x) => ({ d, run, c } = x));

/** Start a backgrounded session through the CLI and return its id. */
async function startBg(args: string[]): Promise<string> {
  const r = await run(['exec', '--bg', ...args]);
  const id = /Session (\S+) is still running/.exec(r.stdout)?.[1];
  if (!id) throw new Error(`no session id in ${JSON.stringify(r)}`);
  return id;
}

async function recordOf(id: string): Promise<any> {
  const { sessions } = await c.process({ action: 'list' });
  return sessions.find((s: any) => s.sessionId === id);
}

const logOf = async (id: string): Promise<string> => (await c.process({ action: 'log', sessionId: id })).output;

describe('procctl resume', () => {
  it('--yes answers a confirm prompt of a pty session', async () => {
    const id = await startBg(['--pty', '--', "read -p 'Continue? [y/N] ' a; echo got=$a"]);
    await waitFor(async () => (await recordOf(id)).status === 'waiting_input', { what: 'the session to wait for input' });
    const ps = JSON.parse((await run(['--json', 'ps'])).stdout);
    expect(ps.sessions.find((s: any) => s.sessionId === id).interrupt).toMatchObject({ id: expect.any(String) });
    const r = await run(['resume', id, '--yes']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('with yes');
    await waitFor(async () => (await recordOf(id)).status === 'completed', { what: 'the session to end' });
    expect(await logOf(id)).toContain('got=y');
  });

  it('takes exactly one answer, and refuses a session with no question', async () => {
    expect((await run(['resume', 'x'])).code).toBe(2);
    const both = await run(['resume', 'x', '--yes', '--text', 'a']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain('exactly one of --yes, --no, --text T or --eof');
    const id = await startBg(['--', 'sleep 30']);
    const none = await run(['resume', id, '--eof']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('no pending interrupt');
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });
});

describe('procctl send-keys, paste, submit, signal', () => {
  it('types keys into a pty cat, and C-d ends it', async () => {
    const id = await startBg(['--pty', '--', 'cat']);
    const r = await run(['send-keys', id, 'h', 'i', 'Enter']);
    expect(r.code).toBe(0);
    await waitFor(async () => /hi\r?\n(.|\n)*hi/.test(await logOf(id)), { what: 'cat to echo hi' });
    const paste = await run(['paste', id, 'pasted']);
    expect(paste.code).toBe(0);
    expect((await run(['submit', id])).code).toBe(0);
    await waitFor(async () => /pasted\r?\n(.|\n)*pasted/.test(await logOf(id)), { what: 'cat to echo the paste' });
    expect((await run(['send-keys', id, 'C-d'])).code).toBe(0);
    await waitFor(async () => (await recordOf(id)).status === 'completed', { what: 'cat to end' });
  });

  it('names an unknown key and sends nothing', async () => {
    const id = await startBg(['--pty', '--', 'cat']);
    const r = await run(['send-keys', id, 'x', 'NoSuchKey']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('unknown key "NoSuchKey"');
    expect((await run(['send-keys', id])).code).toBe(2);
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });

  it('signal delivers one signal to the group', async () => {
    const id = await startBg(['--', 'trap "echo got USR1" USR1; echo ready; while :; do sleep 0.1; done']);
    await waitFor(async () => (await logOf(id)).includes('ready'), { what: 'the trap to be set' });
    const r = await run(['signal', id, 'USR1']);
    expect(r.code).toBe(0);
    await waitFor(async () => (await logOf(id)).includes('got USR1'), { what: 'the trap to run' });
    expect((await recordOf(id)).status).toBe('running');
    expect((await run(['signal', id, 'NOPE'])).code).toBe(2);
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });
});

describe('procctl checkpoint', () => {
  it('records a checkpoint from inside a job', async () => {
    const job = `${JSON.stringify(process.execPath)} ${JSON.stringify(PROCCTL)} checkpoint step1 --data '{"n":1}' && echo reported; sleep 30`;
    const id = await startBg(['--', job]);
    await waitFor(async () => (await logOf(id)).includes('reported'), { what: 'the job to report' });
    const ps = JSON.parse((await run(['--json', 'ps'])).stdout);
    expect(ps.sessions.find((s: any) => s.sessionId === id).checkpoint).toMatchObject({ name: 'step1', data: { n: 1 } });
    const poll = JSON.parse((await run(['--json', 'poll', id])).stdout);
    expect(poll.checkpoint).toMatchObject({ name: 'step1' });
    await c.process({ action: 'kill', sessionId: id, graceMs: 200 });
  });

  it('exits 2 outside a session, and on --data that is not JSON', async () => {
    const outside = await cli(['--socket', d.socket, 'checkpoint', 'x']);
    expect(outside.code).toBe(2);
    expect(outside.stderr).toContain('PROCCTL_SESSION_ID is not set');
    const bad = await cli(['checkpoint', 'x', '--data', '{nope'], { env: { PROCCTL_SOCKET: d.socket, PROCCTL_SESSION_ID: 'whatever' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('--data must be JSON');
  });
});
