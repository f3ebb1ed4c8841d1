import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { StateStore } from '../../../src/daemon/state.js';
import { SessionRecordSchema } from '../../../src/session/record.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const running = (id: string) =>
  SessionRecordSchema.parse({
    v: 1, id, scope: 'default', command: 'sleep 100', name: 'sleep', cwd: '/', stdin: 'pipe', status: 'running',
    startedAt: Date.now(), exitCode: null, signal: null, pid: 4242, checkpoints: [], pastInterrupts: [],
    output: { retained: '', dropped: 0, total: 0, pending: '' },
  });

/**
 * The records a start reads back (SPEC §10): a planned restart's new image runs the sessions it
 * was handed with their records (SPEC §19), so their files are not read again at recovery.
 */
describe('loading the records of the last run', () => {
  it('skips the files of sessions this image runs already: not read, not checked, not set aside, and still its own', () => {
    const dir = mkdtempSync(join(tmpdir(), 'procctl-state-'));
    dirs.push(dir);
    const state = new StateStore(dir, pino({ level: 'silent' }));
    state.init(join(dir, 'sock'));
    state.save(running('kept'));
    state.save(running('other'));
    // A file that would be set aside as corrupt if it were read.
    const file = join(dir, 'sessions', 'kept.json');
    expect(existsSync(file)).toBe(true);
    writeFileSync(file, '{"torn');
    const { records, corrupt } = state.loadAll(new Set(['kept']));
    expect(records.map((r) => r.id)).toEqual(['other']);
    expect(corrupt).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe('{"torn');
    // Still the store's own file: the session's end removes it as any running session's.
    state.save({ ...running('kept'), status: 'completed', endedAt: Date.now(), exitCode: 0 });
    expect(existsSync(file)).toBe(false);
  });
});
