import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { resolveShell, shellArgs } from '../../../src/runner/shell.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-shell-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An executable file with the given name, standing in for an installed shell. */
function fakeShell(name: string, mode = 0o755): string {
  const path = join(dir, name);
  writeFileSync(path, '#!/bin/sh\n');
  chmodSync(path, mode);
  return path;
}

const BASH = ['/bin/bash', '/usr/bin/bash', '/usr/local/bin/bash'].find((p) => existsSync(p));

describe('resolveShell', () => {
  it('uses /bin/sh when SHELL is unset or empty, as under systemd', () => {
    expect(resolveShell({})).toBe('/bin/sh');
    expect(resolveShell({ SHELL: '' })).toBe('/bin/sh');
  });

  it('uses $SHELL when it is executable', () => {
    const zsh = fakeShell('zsh');
    expect(resolveShell({ SHELL: zsh })).toBe(zsh);
  });

  it('falls back to /bin/sh when $SHELL does not exist or cannot run', () => {
    expect(resolveShell({ SHELL: join(dir, 'no-such-shell') })).toBe('/bin/sh');
    expect(resolveShell({ SHELL: fakeShell('not-exec', 0o644) })).toBe('/bin/sh');
  });

  it('looks for the shell again after its time, the call after that seeing the change, none on the call itself', async () => {
    const t0 = Date.now();
    const ksh = fakeShell('ksh');
    expect(resolveShell({ SHELL: ksh }, t0)).toBe(ksh);
    rmSync(ksh);
    // Trusted for two seconds; then answered with what was found, and looked for once the turn is over.
    expect(resolveShell({ SHELL: ksh }, t0 + 1000)).toBe(ksh);
    expect(resolveShell({ SHELL: ksh }, t0 + 2500)).toBe(ksh);
    await new Promise((r) => setImmediate(r));
    expect(resolveShell({ SHELL: ksh }, t0 + 2600)).toBe('/bin/sh');
    // That call found the look old too: its look is let run before the shell comes back.
    await new Promise((r) => setImmediate(r));
    // Installed again: the same way back.
    fakeShell('ksh');
    const t1 = Date.now();
    expect(resolveShell({ SHELL: ksh }, t1 + 2500)).toBe('/bin/sh');
    await new Promise((r) => setImmediate(r));
    expect(resolveShell({ SHELL: ksh }, t1 + 2600)).toBe(ksh);
  });

  it.skipIf(!BASH)('runs bash instead of fish', () => {
    expect(resolveShell({ SHELL: fakeShell('fish') })).toBe(BASH);
    expect(resolveShell({ SHELL: '/usr/bin/fish' })).toBe(BASH);
  });
});

describe('shellArgs', () => {
  it('gives bash --norc before -c', () => {
    expect(shellArgs('/bin/bash', 'echo hi')).toEqual(['--norc', '-c', 'echo hi']);
    expect(shellArgs('/usr/local/bin/bash', 'x')).toEqual(['--norc', '-c', 'x']);
  });

  it('gives other shells just -c', () => {
    expect(shellArgs('/bin/sh', 'echo hi')).toEqual(['-c', 'echo hi']);
    expect(shellArgs('/usr/bin/zsh', 'echo hi')).toEqual(['-c', 'echo hi']);
    expect(shellArgs('/bin/dash', 'a; b')).toEqual(['-c', 'a; b']);
  });

  it('passes the command as one argument, untouched', () => {
    const command = `echo "$HOME" 'x y' && printf '%s\\n' \\`;
    expect(shellArgs('/bin/sh', command)[1]).toBe(command);
  });
});
