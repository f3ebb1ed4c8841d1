import { describe, expect, it } from 'vitest';
import { counted, statusText } from '../../web/format.js';
import { statusCell } from '../../src/cli/render.js';

describe("the console's words for statuses and counts", () => {
  it('says a waiting status as what it waits for', () => {
    expect(statusText({ status: 'approval_required' })).toBe('waiting for approval');
    expect(statusText({ status: 'waiting_input' })).toBe('waiting for input');
    expect(statusText({ status: 'running' })).toBe('running');
    expect(statusText({ status: 'running', paused: true })).toBe('paused');
    expect(statusText({ status: 'waiting_input', paused: true })).toBe('paused (waiting for input)');
  });

  it('says an end as `procctl ps` does', () => {
    const ends = [
      { status: 'completed', exitCode: 0 },
      { status: 'completed', exitCode: 2 },
      { status: 'failed', exitCode: null, signal: 'SIGTERM', reason: 'user' },
      { status: 'failed', exitCode: 1, signal: null, reason: 'timeout' },
      { status: 'failed', exitCode: null, signal: 'SIGKILL', reason: 'signal' },
      { status: 'denied', reason: 'refused' },
      { status: 'denied' },
    ];
    for (const e of ends) expect(statusText(e)).toBe(statusCell(e));
    expect(ends.map(statusText)).toEqual(['completed', 'completed (2)', 'failed (SIGTERM, user)', 'failed (1, timeout)', 'failed (SIGKILL)', 'denied (refused)', 'denied']);
  });

  it('counts with the plural after any number but one', () => {
    expect(counted(1, 'file')).toBe('1 file');
    expect(counted(4, 'file')).toBe('4 files');
    expect(counted(0, 'file')).toBe('0 files');
    expect(counted(1, 'time')).toBe('1 time');
    expect(counted(3, 'time')).toBe('3 times');
  });
});
