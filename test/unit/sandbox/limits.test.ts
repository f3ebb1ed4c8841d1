import { describe, expect, it } from 'vitest';
import { limitReason, prlimitOptions, rlimits } from '../../../src/sandbox/limits.js';

describe('limits', () => {
  it('none configured: no rlimit at all', () => {
    expect(rlimits({})).toEqual([]);
  });

  it('maps each key to its rlimit; the CPU hard limit is a second above the soft one, so SIGXCPU comes first', () => {
    const list = rlimits({ cpuSeconds: 10, memoryBytes: 1 << 30, openFiles: 64, processes: 100, fileSizeBytes: 4096 });
    expect(list).toEqual([
      ['cpu', 10, 11],
      ['as', 1 << 30, 1 << 30],
      ['nofile', 64, 64],
      ['nproc', 100, 100],
      ['fsize', 4096, 4096],
    ]);
    expect(prlimitOptions(list)).toEqual(['--cpu=10:11', `--as=${1 << 30}:${1 << 30}`, '--nofile=64:64', '--nproc=100:100', '--fsize=4096:4096']);
  });

  it('names the limit a signal says was hit (or a shell, as 128+N), only when that limit is set', () => {
    const cpu = rlimits({ cpuSeconds: 1 });
    const fsize = rlimits({ fileSizeBytes: 10 });
    const signal = (name: string) => ({ signal: name, exitCode: null });
    const code = (n: number) => ({ signal: null, exitCode: n });
    expect(limitReason(signal('SIGXCPU'), cpu)).toBe('cpu_limit');
    expect(limitReason(code(128 + 24), cpu)).toBe('cpu_limit');
    expect(limitReason(signal('SIGXFSZ'), fsize)).toBe('file_size_limit');
    expect(limitReason(code(128 + 25), fsize)).toBe('file_size_limit');
    expect(limitReason(signal('SIGXFSZ'), cpu)).toBeUndefined();
    expect(limitReason(code(128 + 25), cpu)).toBeUndefined();
    expect(limitReason(signal('SIGKILL'), cpu)).toBeUndefined();
    expect(limitReason(code(1), cpu)).toBeUndefined();
  });
});
