import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { asPerson, startDaemon, type TestDaemon } from '../helpers/daemon.js';
import type { TestClient } from '../helpers/rpc.js';
import { killMarked, scratchRoot, SKIP_SANDBOX } from './sandbox-support.js';

// Held changes in the audit trail (SPEC §18, §16): the review decision, the person's answer, and the apply, undo and discard with their file counts.
const fs = scratchRoot('procctl-audit-review-');
const ws = fs.dir('ws');
const ids = new Set<string>();
let d: TestDaemon;
let c: TestClient;

describe.skipIf(SKIP_SANDBOX)('changes in the audit trail', () => {
  beforeAll(async () => {
    d = await startDaemon({
      env: { PROCCTL_STATE_DIR: join(fs.root, 'state') },
      config: { sandbox: { mode: 'workspace-write', workspaces: [ws] }, approvals: { rules: [{ command: ['touch'], action: 'review', reason: 'a person sees what it writes' }] } },
    });
    c = await d.client();
  });
  afterAll(async () => {
    c?.close();
    await d?.stop();
    killMarked(ids);
    fs.cleanup();
  });

  const reviewed = async (name: string, command: string) => {
    const dir = join(ws, name);
    mkdirSync(dir);
    const r = await c.exec({ scope: 'agent', command, workdir: dir, yieldMs: 60_000 });
    ids.add(r.sessionId);
    expect(r.interrupt?.kind, r.text).toBe('changes');
    return { r, dir };
  };
  const story = async (id: string) => (await c.call('history', { scope: 'agent', sessionId: id })).records as Record<string, unknown>[];

  it('a review rule, the person applying two files, then undoing them: each on record with its counts', async () => {
    const { r, dir } = await reviewed('applied', 'touch a b');
    const yes = await c.process({ scope: 'agent', action: 'resume', sessionId: r.sessionId, input: { confirm: true }, ...asPerson(d) });
    expect(yes.state).toBe('applied');
    expect(existsSync(join(dir, 'a'))).toBe(true);
    await c.process({ scope: 'agent', action: 'undo', sessionId: r.sessionId });
    const records = await story(r.sessionId);
    expect(records.map((x) => x.type)).toEqual(['session', 'decision', 'end', 'answer', 'changes', 'changes']);
    expect(records[0]).toMatchObject({ changes: 'review', sandbox: 'workspace-write' });
    expect(records[1]).toMatchObject({ action: 'review', rule: 0, reason: 'a person sees what it writes' });
    expect(records[3]).toMatchObject({ kind: 'changes', answer: 'approve', by: 'approver' });
    expect(records[4]).toMatchObject({ action: 'applied', files: 2, conflicts: 0, refused: 0, failed: 0 });
    expect(records[5]).toMatchObject({ action: 'undone', files: 2 });
  });

  it('a refusal discards: the answer and the discard with the count of what was dropped', async () => {
    const { r, dir } = await reviewed('refused', 'touch c');
    await c.process({ scope: 'agent', action: 'resume', sessionId: r.sessionId, input: { confirm: false }, ...asPerson(d) });
    expect(existsSync(join(dir, 'c'))).toBe(false);
    const records = await story(r.sessionId);
    expect(records.slice(-2)).toMatchObject([{ type: 'answer', answer: 'deny' }, { type: 'changes', action: 'discarded', files: 1 }]);
  });
});
