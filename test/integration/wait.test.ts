import { afterAll, describe, expect, it } from 'vitest';
import { cliOn } from '../cli/run.js';
import { type TestDaemon } from '../helpers/daemon.js';
import { sharedDaemon, type Scopes } from '../helpers/session.js';

let d: TestDaemon;
let scopes: Scopes;

/** Start a command in the background; its id. */
async function bg(s: ReturnType<Scopes['next']>, command: string): Promise<string> {
  const r = await s.exec({ command, background: true });
  scopes.track(r.pid);
  return r.sessionId as string;
}

describe('process wait (SPEC §6)', () => {
  sharedDaemon({}, (x) => ({ d, scopes } = x));
  const ids: string[] = [];
  afterAll(async () => {
    for (const sessionId of ids) await scopes.next('cleanup').process({ action: 'kill', sessionId }).catch(() => undefined);
  });

  it('any: answers when the first of them ends, with each as it is now; the others run on', async () => {
    const s = scopes.next('wait-any');
    const long = await bg(s, 'sleep 60');
    const short = await bg(s, 'sleep 0.3; exit 3');
    const r = await s.process({ action: 'wait', sessionIds: [long, short], timeout: 60_000 });
    expect(r.done).toEqual([short]);
    expect(r.sessions.find((x: any) => x.sessionId === short)).toMatchObject({ status: 'completed', exitCode: 3 });
    expect(r.sessions.find((x: any) => x.sessionId === long)).toMatchObject({ status: 'running' });
    expect(r.text).toContain('1 of 2 session(s) done');
    await s.process({ action: 'kill', sessionId: long });
  });

  it('all: answers when every one has ended', async () => {
    const s = scopes.next('wait-all');
    const a = await bg(s, 'sleep 0.2');
    const b = await bg(s, 'sleep 0.5; echo done');
    const r = await s.process({ action: 'wait', sessionIds: [a, b], mode: 'all', timeout: 60_000 });
    expect(new Set(r.done)).toEqual(new Set([a, b]));
    expect(r.sessions.map((x: any) => x.status)).toEqual(['completed', 'completed']);
  });

  it('a session that waits for input or for an approval is done too: someone has to answer it', async () => {
    const s = scopes.next('wait-ask');
    const long = await bg(s, 'sleep 60');
    const asks = await bg(s, 'read answer; echo "got $answer"');
    const r = await s.process({ action: 'wait', sessionIds: [long, asks], timeout: 60_000 });
    expect(r.done).toEqual([asks]);
    expect(r.sessions.find((x: any) => x.sessionId === asks).status).toBe('waiting_input');
    await s.process({ action: 'kill', sessionId: long });
    await s.process({ action: 'kill', sessionId: asks });
  });

  it('the timeout passes first: it says which still run and how to wait again', async () => {
    const s = scopes.next('wait-timeout');
    const long = await bg(s, 'sleep 60');
    const r = await s.process({ action: 'wait', sessionIds: [long], timeout: 200 });
    expect(r.done).toEqual([]);
    expect(r.text).toContain(`still running: ${long}`);
    expect(r.text).toContain(`process {action:"wait", sessionIds:["${long}"]}`);
    await s.process({ action: 'kill', sessionId: long });
  });

  it('an unknown id is not_found and no ids is invalid, naming the fix', async () => {
    const s = scopes.next('wait-bad');
    expect((await s.error('process', { action: 'wait', sessionIds: ['nosuchid'] })).data.kind).toBe('not_found');
    const none = await s.error('process', { action: 'wait' });
    expect(none.data.kind).toBe('invalid');
    expect(none.message).toContain('needs sessionIds');
  });

  it('procctl wait: exit 0 when met, 1 when one done failed, 4 when the timeout passed first; --all waits for every one', async () => {
    const on = cliOn(d.socket);
    const s = scopes.next('cli-wait');
    const run = (args: string[]) => on(['--scope', s.scope, ...args]);
    const ok = await bg(s, 'sleep 0.2');
    const bad = await bg(s, 'sleep 0.3; exit 2');
    const long = await bg(s, 'sleep 60');
    const all = await run(['wait', ok, bad, '--all', '--timeout', '60000']);
    expect(all.code, all.stderr).toBe(1);
    expect(all.stdout).toContain('All 2 session(s) are done');
    const met = await run(['wait', long, ok]);
    expect(met.code, met.stderr).toBe(0);
    const timedOut = await run(['wait', long, '--timeout', '100']);
    expect(timedOut.code).toBe(4);
    expect(timedOut.stdout).toContain(`\`procctl --scope ${s.scope} wait ${long}\``);
    await s.process({ action: 'kill', sessionId: long });
  });
});

describe("poll's retryInMs", () => {
  sharedDaemon({}, (x) => ({ d, scopes } = x));

  it('backs off while polls find nothing new (1, 5, 10, 30, 60 s) and comes back to 1 s with new output', async () => {
    const s = scopes.next('retry');
    const id = await bg(s, 'while read line; do echo "got $line"; done');
    const retries: number[] = [];
    for (let i = 0; i < 6; i++) retries.push((await s.process({ action: 'poll', sessionId: id })).retryInMs);
    expect(retries).toEqual([1000, 5000, 10_000, 30_000, 60_000, 60_000]);
    await s.process({ action: 'write', sessionId: id, data: 'x\n' });
    await s.waitOutput(id, 'got x');
    const after = await s.process({ action: 'poll', sessionId: id });
    expect(after.output).toContain('got x');
    expect(after.retryInMs).toBe(1000);
    expect(after.text).toContain(`process {action:"wait", sessionIds:["${id}"]}`);
    await s.process({ action: 'kill', sessionId: id });
  });
});
