import { describe, expect, it } from 'vitest';
import { aroundOutput, bytes, duration, endNotice, eventLine, statusCell, table } from '../../src/cli/render.js';
import { sessionTable } from '../../src/cli/commands/ps.js';

describe('cli rendering', () => {
  it('lays out a table with padded columns and an unpadded last one', () => {
    expect(table(['ID', 'NAME'], [['a', 'x y'], ['bbbb', 'z']])).toBe('ID    NAME\na     x y\nbbbb  z');
  });

  it.each([
    [850, '850ms'],
    [4200, '4.2s'],
    [42_000, '42s'],
    [185_000, '3m05s'],
    [7_380_000, '2h03m'],
    [100_800_000, '1d04h'],
    [-1, '-'],
  ])('formats %d ms as %s', (ms, text) => {
    expect(duration(ms)).toBe(text);
  });

  it('says how a session ended', () => {
    expect(statusCell({ status: 'running' })).toBe('running');
    expect(statusCell({ status: 'completed', exitCode: 0 })).toBe('completed');
    expect(statusCell({ status: 'completed', exitCode: 2 })).toBe('completed (2)');
    expect(statusCell({ status: 'failed', exitCode: null, signal: 'SIGTERM', reason: 'user' })).toBe('failed (SIGTERM, user)');
    expect(statusCell({ status: 'failed', exitCode: 137, signal: 'SIGKILL', reason: 'signal' })).toBe('failed (SIGKILL)');
    expect(endNotice({ sessionId: 'ab12', status: 'completed', exitCode: 0 })).toBe('[session ab12 completed (exit code 0)]');
    expect(statusCell({ status: 'running', paused: true })).toBe('paused');
    expect(statusCell({ status: 'waiting_input', paused: true })).toBe('paused (waiting_input)');
    expect(statusCell({ status: 'failed', exitCode: 137, signal: null, reason: 'memory_limit' })).toBe('failed (137, memory_limit)');
  });

  it.each([
    [0, '0B'],
    [1023, '1023B'],
    [1536, '1.5K'],
    [12 * 1024 * 1024, '12M'],
    [3 * 1024 ** 3, '3.0G'],
  ])('formats %d bytes as %s', (n, text) => {
    expect(bytes(n)).toBe(text);
  });

  it('ps shows CPU and MEM where sessions have cgroups: memory now while running, the most it held once ended', () => {
    const base = { pid: 7, startedAt: '2026-01-01T00:00:00Z', runtimeMs: 5000, name: 'job' };
    const used = { cpuMs: 1500, memoryBytes: 2 * 1024 * 1024, memoryPeakBytes: 64 * 1024 * 1024, processes: 2 };
    const text = sessionTable([
      { ...base, sessionId: 'run', status: 'running', resources: used },
      { ...base, sessionId: 'done', status: 'completed', exitCode: 0, startedAt: '2025-01-01T00:00:00Z', resources: used },
    ]);
    expect(text.split('\n')).toEqual([
      'ID    STATUS     PID  RUNTIME  CPU   MEM   NAME',
      'run   running    7    5.0s     1.5s  2.0M  job',
      'done  completed  7    5.0s     1.5s  64M   job',
    ]);
    expect(sessionTable([{ ...base, sessionId: 'x', status: 'running' }]).split('\n')[0]).toBe('ID  STATUS   PID  RUNTIME  NAME');
  });

  it('ps shows CHANGES where any session was run in review mode: pending paths, or how the review ended', () => {
    const base = { pid: null, runtimeMs: 1000, name: 'job', status: 'completed', exitCode: 0 };
    const text = sessionTable([
      { ...base, sessionId: 'held', startedAt: '2026-01-03T00:00:00Z', changes: { state: 'pending', pending: true, files: 3, bytes: 2048 } },
      { ...base, sessionId: 'took', startedAt: '2026-01-02T00:00:00Z', changes: { state: 'applied', pending: false, files: 0, bytes: 0 } },
      { ...base, sessionId: 'plain', startedAt: '2026-01-01T00:00:00Z' },
    ]);
    expect(text.split('\n')).toEqual([
      'ID     STATUS     PID  RUNTIME  CHANGES           NAME',
      'held   completed  -    1.0s     3 pending (2.0K)  job',
      'took   completed  -    1.0s     applied           job',
      'plain  completed  -    1.0s     -                 job',
    ]);
  });

  it('splits a result text around its output', () => {
    expect(aroundOutput('[note]\nhello\nworld\n\n(Command exited with code 1)', 'hello\nworld\n')).toEqual({
      before: '[note]',
      after: '(Command exited with code 1)',
    });
    expect(aroundOutput('(no output)', '')).toEqual({ before: '', after: '(no output)' });
  });

  it('renders events on one line each', () => {
    const at = new Date(2025, 0, 1, 12, 0, 1, 250).toISOString();
    expect(eventLine({ type: 'output', sessionId: 'ab12cd34', at, stream: 'stdout', data: 'a\nb\n', offset: 0 })).toBe(
      '12:00:01.250  ab12cd34  output    stdout "a\\nb\\n"',
    );
    expect(eventLine({ type: 'exited', sessionId: 'ab12cd34', at, status: 'completed', exitCode: 0, text: 'Process exited with code 0.' })).toBe(
      '12:00:01.250  ab12cd34  exited    completed :: Process exited with code 0.',
    );
    const waiting = { type: 'waiting_input', sessionId: 'x', at, interrupt: { kind: 'confirm', reason: 'Continue? [y/N]' } };
    expect(eventLine(waiting)).toMatch(/waiting_input  confirm: "Continue\? \[y\/N\]"$/);
    expect(eventLine({ type: 'checkpoint', sessionId: 'x', at, name: 'step-2', data: { n: 2 } })).toMatch(/checkpoint  step-2 \{"n":2\}$/);
    const long = eventLine({ type: 'output', sessionId: 'x', at, stream: 'stderr', data: 'y'.repeat(500) });
    expect(long).toContain('… (+200 chars)');
    expect(long.includes('\n')).toBe(false);
  });
});
