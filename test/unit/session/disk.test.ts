import { describe, expect, it } from 'vitest';
import { DiskHealth, type DiskState } from '../../../src/session/disk.js';

function health(): { disk: DiskHealth; told: DiskState[] } {
  const told: DiskState[] = [];
  return { disk: new DiskHealth((state) => told.push(state)), told };
}

describe('the state directory health', () => {
  it('a write that succeeds clears the fault of its own kind', () => {
    const { disk, told } = health();
    disk.failed('file', new Error('EACCES: permission denied'), 'a spool');
    expect(disk.state).toEqual({ writable: false, error: 'EACCES: permission denied' });
    disk.succeeded('file');
    expect(disk.state).toEqual({ writable: true });
    expect(told).toEqual([{ writable: false, error: 'EACCES: permission denied' }, { writable: true }]);
  });

  it('a write of another kind does not: a journal line appended says nothing of whether a spool can be made', () => {
    const { disk, told } = health();
    disk.failed('file', new Error('EACCES: permission denied'), 'a spool');
    disk.succeeded('data');
    expect(disk.state).toEqual({ writable: false, error: 'EACCES: permission denied' });
    disk.failed('data', new Error('ENOSPC: no space left on device'), 'a journal line');
    expect(disk.state, 'the newest error is told').toEqual({ writable: false, error: 'ENOSPC: no space left on device' });
    disk.succeeded('data');
    expect(disk.state).toEqual({ writable: false, error: 'EACCES: permission denied' });
    disk.succeeded('file');
    expect(disk.state).toEqual({ writable: true });
    expect(told, 'once when it starts, once when it is over').toEqual([{ writable: false, error: 'EACCES: permission denied' }, { writable: true }]);
  });
});
