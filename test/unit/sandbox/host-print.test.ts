import { chmodSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { HOST_RECHECK_MS, hostLook, hostPrint } from '../../../src/sandbox/host-print.js';
import { PROGRAMS } from '../../../src/sandbox/programs.js';

const dir = mkdtempSync(join(tmpdir(), 'procctl-print-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An executable `name` in `dir`, written beside and renamed in, as a package manager installs one. */
function install(name: string, body: string): void {
  const beside = join(dir, `.${name}.new`);
  writeFileSync(beside, `#!/bin/sh\n${body}\n`);
  chmodSync(beside, 0o755);
  renameSync(beside, join(dir, name));
}

/** The turn after this one, where a look found due was made. */
const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

/** The print at `now` once a call at `now` has been answered and its turn is over: what the next call sees. */
async function printAfter(now: number): Promise<string> {
  hostPrint(dir, now);
  await nextTurn();
  return hostPrint(dir, now);
}

describe('hostPrint', () => {
  it('is kept for HOST_RECHECK_MS, then the host is looked at after the turn of the call that found it older: a program installed, another file put in its place', async () => {
    // Clock values of its own: far from any other test's, and never real time.
    const t = 1e12;
    const without = hostPrint(dir, t);
    expect(without).toContain('bwrap:-');

    install('bwrap', 'exit 0');
    // Within the window: the host is not looked at again, now or after the turn.
    expect(await printAfter(t + HOST_RECHECK_MS - 1)).toBe(without);
    // Older: the call itself is answered with the print it holds; the host is looked at after its turn.
    expect(hostPrint(dir, t + HOST_RECHECK_MS)).toBe(without);
    await nextTurn();
    const installed = hostPrint(dir, t + HOST_RECHECK_MS);
    expect(installed).not.toBe(without);
    expect(installed).toContain(`bwrap:${join(dir, 'bwrap')}:`);

    // An upgrade: the same path, another file (another inode).
    install('bwrap', 'exit 1');
    const upgraded = await printAfter(t + 2 * HOST_RECHECK_MS);
    expect(upgraded).toContain(`bwrap:${join(dir, 'bwrap')}:`);
    expect(upgraded).not.toBe(installed);

    // Nothing changed: the same print.
    expect(await printAfter(t + 3 * HOST_RECHECK_MS)).toBe(upgraded);
    rmSync(join(dir, 'bwrap'));
    expect(await printAfter(t + 4 * HOST_RECHECK_MS)).toBe(without);
  });

  it('a look found due is made once, however many calls find it so in one turn', async () => {
    const t = 1.5e12;
    const before = hostPrint(dir, t);
    install('unshare', 'exit 0');
    for (let i = 0; i < 5; i++) expect(hostPrint(dir, t + HOST_RECHECK_MS + i)).toBe(before);
    await nextTurn();
    // Stamped with the call that found it due: trusted for the window from there.
    const after = hostPrint(dir, t + HOST_RECHECK_MS + 1);
    expect(after).toContain(`unshare:${join(dir, 'unshare')}:`);
    rmSync(join(dir, 'unshare'));
  });

  it('a start, a reload or a restart\'s check asks for it fresh: looked at now once older than the window', async () => {
    const t = 1.7e12;
    await nextTurn();
    const before = hostLook(dir, t, true).print;
    install('setpriv', 'exit 0');
    expect(hostLook(dir, t + HOST_RECHECK_MS - 1, true).print).toBe(before);
    const fresh = hostLook(dir, t + HOST_RECHECK_MS, true);
    expect(fresh.print).toContain(`setpriv:${join(dir, 'setpriv')}:`);
    expect(fresh.programs.setpriv).toBe(join(dir, 'setpriv'));
    rmSync(join(dir, 'setpriv'));
  });

  it('another PATH is looked at at once', async () => {
    const t = 2e12;
    const here = await printAfter(t);
    const other = mkdtempSync(join(tmpdir(), 'procctl-print-other-'));
    try {
      writeFileSync(join(other, 'env'), '#!/bin/sh\n');
      chmodSync(join(other, 'env'), 0o755);
      expect(hostPrint(other, t + 1)).toContain(`env:${join(other, 'env')}:`);
      expect(hostPrint(dir, t + 2)).toBe(here);
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });

  it('looks at every program a check uses, and gives the check the files it saw', async () => {
    const t = 3e12;
    install('prlimit', 'exit 0');
    hostLook(dir, t);
    await nextTurn();
    const look = hostLook(dir, t);
    for (const name of PROGRAMS) expect(look.print).toMatch(new RegExp(`^${name}:`, 'm'));
    expect(look.programs.prlimit).toBe(join(dir, 'prlimit'));
    expect(look.programs.bwrap).toBeUndefined();
    expect(look.print).toContain(`prlimit:${join(dir, 'prlimit')}:`);
    rmSync(join(dir, 'prlimit'));
  });
});
