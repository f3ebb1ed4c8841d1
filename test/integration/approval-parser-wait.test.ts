import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, stopAllDaemons, type TestDaemon } from '../helpers/daemon.js';
import { daemonStatus, restartAndWait } from '../helpers/restart.js';
import type { RpcResponse } from '../helpers/rpc.js';
import { Scoped } from '../helpers/session.js';

/**
 * A remembered yes (SPEC §8) is kept as the command's parts, parsed: an answer that comes before
 * the approval rules' bash parser has loaded (a daemon loads it once it serves: after a planned
 * restart, say) waits for it, and is then checked again, since while it waited the approval may
 * have been settled another way. The load is held with PROCCTL_FAULT_BASH_HOLD (tests only: the
 * load waits while that file exists), so the answer is certain to wait, whatever the load here.
 */

const dir = mkdtempSync(join(tmpdir(), 'procctl-parser-wait-'));
const RULES = [{ command: ['echo', 'deploy'], action: 'ask', reason: 'deploys' }];

afterEach(async () => {
  await stopAllDaemons();
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * A daemon whose approval rules ask about `echo deploy`, a command that asked (it would touch
 * `mark` first), and the same daemon restarted with its parser's load held: the approval waits on.
 */
async function askedThenRestarted(name: string): Promise<{ d: TestDaemon; hold: string; mark: string; sessionId: string }> {
  const hold = join(dir, `${name}.hold`);
  const mark = join(dir, `${name}.ran`);
  const d = await startDaemon({ config: { approvals: { rules: RULES } }, env: { PROCCTL_FAULT_BASH_HOLD: hold } });
  const s = new Scoped(await d.client(), 'wait');
  const r = await s.exec({ command: `touch ${mark}; echo deploy ${name}` });
  expect(r.status, JSON.stringify(r).slice(0, 300)).toBe('approval_required');
  s.c.close();
  writeFileSync(hold, '');
  await restartAndWait(d);
  // Held: "loading" once the image has begun to load it, "not loaded" if it has not yet (then the answer begins it).
  expect(['not loaded', 'loading']).toContain((await daemonStatus(d)).approvals.parser);
  return { d, hold, mark, sessionId: r.sessionId };
}

/** A person's `resume --yes --remember command`, sent now; whether it was answered yet, and its answer. */
function rememberedYes(s: Scoped, d: TestDaemon, sessionId: string): { answered: () => boolean; answer: Promise<RpcResponse> } {
  let answered = false;
  const answer = s.request('process', { action: 'resume', sessionId, input: { confirm: true, remember: 'command' }, ...asPerson(d) }).finally(() => (answered = true));
  return { answered: () => answered, answer };
}

describe('an answer that waited for the bash parser is checked again', () => {
  it('withdrawn while it waited: the answer is refused as settled, nothing runs and nothing is remembered', async () => {
    const { d, hold, mark, sessionId } = await askedThenRestarted('withdrawn');
    const s = new Scoped(await d.client(), 'wait');
    // On one connection, in this order: the yes is read first and waits for the parser; the kill does not.
    const yes = rememberedYes(s, d, sessionId);
    const withdrawn = await s.process({ action: 'kill', sessionId });
    expect(withdrawn.status).toBe('denied');
    expect(yes.answered()).toBe(false);

    rmSync(hold);
    const r = await yes.answer;
    expect(r.error?.data?.kind, JSON.stringify(r)).toBe('conflict');
    expect(r.error?.message).toContain(`the approval of session ${sessionId} was settled while this answer waited for the bash parser (it is denied now); nothing was started`);
    expect((await daemonStatus(d)).approvals.parser).toBe('ready');
    expect((await s.list()).find((x) => x.sessionId === sessionId)).toMatchObject({ status: 'denied' });
    expect(existsSync(mark)).toBe(false);
    // The yes kept no rule: the same command asks again.
    expect((await s.exec({ command: `touch ${mark}; echo deploy withdrawn` })).status).toBe('approval_required');
    expect(existsSync(mark)).toBe(false);
  });

  it('refused by another answer while it waited: the waiting yes is refused as settled, and nothing runs', async () => {
    const { d, hold, mark, sessionId } = await askedThenRestarted('refused');
    const s = new Scoped(await d.client(), 'wait');
    const yes = rememberedYes(s, d, sessionId);
    // A no needs no parser: it is answered while the yes still waits.
    const no = await s.process({ action: 'resume', sessionId, input: { confirm: false }, ...asPerson(d) });
    expect(no.status).toBe('denied');
    expect(yes.answered()).toBe(false);

    rmSync(hold);
    const r = await yes.answer;
    expect(r.error?.data?.kind, JSON.stringify(r)).toBe('conflict');
    expect(r.error?.message).toContain(`the approval of session ${sessionId} was settled while this answer waited for the bash parser (it is denied now)`);
    expect(existsSync(mark)).toBe(false);
    expect((await s.exec({ command: `touch ${mark}; echo deploy refused` })).status).toBe('approval_required');
  });

  it('still waiting once the parser loads: the yes is taken, the command runs, and it is remembered', async () => {
    const { d, hold, mark, sessionId } = await askedThenRestarted('taken');
    const s = new Scoped(await d.client(), 'wait');
    const yes = rememberedYes(s, d, sessionId);
    expect((await s.list()).find((x) => x.sessionId === sessionId)).toMatchObject({ status: 'approval_required' });
    expect(yes.answered()).toBe(false);

    rmSync(hold);
    const r = await yes.answer;
    expect(r.result, JSON.stringify(r)).toMatchObject({ status: 'completed', output: 'deploy taken\n' });
    expect(existsSync(mark)).toBe(true);
    // Remembered as the command that asked: it runs without asking now.
    expect((await s.exec({ command: `touch ${mark}; echo deploy taken` })).status).toBe('completed');
  });
});
