import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { bwrapExitCode, EXIT_STATUS_FILE } from '../../../src/runner/spawn.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
const scratch = () => {
  const d = mkdtempSync(join(tmpdir(), 'procctl-status-'));
  dirs.push(d);
  return d;
};

describe('the exit status bwrap wrote into a job\'s scratch directory (read after a crash)', () => {
  it('is read from the file bwrap wrote: its last exit-code', () => {
    const file = join(scratch(), EXIT_STATUS_FILE);
    writeFileSync(file, '{ "child-pid": 12 }\n{ "exit-code": 7 }\n');
    expect(bwrapExitCode(file)).toBe(7);
  });

  // The job can write its scratch directory: what it puts there must neither hold nor mislead the daemon.
  it('a FIFO the job put in its place is not read (its read would hold the daemon\'s thread): no status', () => {
    const file = join(scratch(), EXIT_STATUS_FILE);
    execFileSync('mkfifo', [file]);
    expect(bwrapExitCode(file)).toBeUndefined();
  });

  it('a symlink the job put in its place is not followed, even to a file that says an exit code', () => {
    const dir = scratch();
    writeFileSync(join(dir, 'elsewhere'), '{ "exit-code": 0 }\n');
    symlinkSync(join(dir, 'elsewhere'), join(dir, EXIT_STATUS_FILE));
    expect(bwrapExitCode(join(dir, EXIT_STATUS_FILE))).toBeUndefined();
  });

  it('no file, or one without an exit code: no status', () => {
    const dir = scratch();
    expect(bwrapExitCode(join(dir, EXIT_STATUS_FILE))).toBeUndefined();
    writeFileSync(join(dir, EXIT_STATUS_FILE), '{ "child-pid": 12 }\n');
    expect(bwrapExitCode(join(dir, EXIT_STATUS_FILE))).toBeUndefined();
  });
});
