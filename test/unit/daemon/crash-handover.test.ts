import { mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { parseConfig } from '../../../src/config/load.js';
import { crashHandover, type Taken } from '../../../src/daemon/handover/crash.js';
import { StateStore } from '../../../src/daemon/state.js';
import { SessionRecordSchema } from '../../../src/session/record.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** A state directory holding one running record of session `id`, led by `pid`. */
function stateWith(id: string, pid: number): StateStore {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-crash-'));
  dirs.push(dir);
  const state = new StateStore(dir, pino({ level: 'silent' }));
  state.init(join(dir, 'sock'));
  state.save(
    SessionRecordSchema.parse({
      v: 1, id, scope: 'default', command: 'sleep 100', name: 'sleep', cwd: '/', stdin: 'pipe', status: 'running',
      startedAt: Date.now(), exitCode: null, signal: null, pid, checkpoints: [], pastInterrupts: [],
      output: { retained: '', dropped: 0, total: 0, pending: '' },
    }),
  );
  return state;
}

/** Descriptors that stand for a job's ends: /dev/null opened `n` times. */
const nulls = (n: number) => Array.from({ length: n }, () => openSync('/dev/null', 'r'));

const kept = (id: string, pid: number, extra: object = {}) => ({ id, job: { pid, stdin: true, timeoutSec: 60, killGraceMs: 1000, limits: [], ...extra } });

describe('what a crashed run\'s guardian kept, taken back', () => {
  const config = parseConfig({});
  const log = pino({ level: 'silent' });

  it('a session with its record, its pid and every descriptor is taken', () => {
    const state = stateWith('one', 4242);
    const taken: Taken[] = [{ kept: kept('one', 4242) as Taken['kept'], fds: nulls(3) }];
    const h = crashHandover(taken, state, config, log);
    expect(h.sessions.map((s) => s.session.record.id)).toEqual(['one']);
    expect(h.sessions[0].session.record.adopted).toBe('crash');
    expect(h.unfit.size).toBe(0);
  });

  it('one the next daemon cannot take says why, for its record: a descriptor missing, another pid, no record', () => {
    const state = stateWith('short', 4242);
    state.save({ ...state.readRunning('short')!, id: 'other', pid: 5151 });
    state.save({ ...state.readRunning('short')!, id: 'chan', pid: 4545 });
    const taken: Taken[] = [
      { kept: kept('short', 4242) as Taken['kept'], fds: nulls(2) },
      { kept: kept('other', 4343) as Taken['kept'], fds: nulls(3) },
      { kept: kept('gone', 4444) as Taken['kept'], fds: nulls(3) },
      { kept: kept('chan', 4545, { channels: { checkpoint: { control: 3 } } }) as Taken['kept'], fds: nulls(3) },
    ];
    const h = crashHandover(taken, state, config, log);
    expect(h.sessions).toEqual([]);
    expect(h.unfit.get('short')).toMatch(/did not keep all of its output descriptors/);
    expect(h.unfit.get('other')).toMatch(/its record names pid 5151, the guardian kept pid 4343/);
    expect(h.unfit.get('gone')).toMatch(/no running record of it here/);
    expect(h.unfit.get('chan')).toMatch(/did not keep all of its channel descriptors/);
  });
});
