import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/daemon.js';
import { packageCopy, removePackageCopies } from '../helpers/package-copy.js';
import { DAEMON_NODE_FLAGS } from '../../src/base/node-flags.js';

/**
 * The daemon's image runs from one bundled file (scripts/bundle-daemon.mjs, docs/durability.md
 * "The daemon's image, bundled") only while every compiled file it was made from is as it was:
 * a copy of the package (new file times, as an install from a tarball gives) runs the bundle; one
 * compiled module changed runs the compiled sources, and what that module now says is what runs.
 */

afterAll(() => {
  removePackageCopies();
});

function version(pkg: string): { stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, join(pkg, 'bin', 'procctld'), '--version'], { env: { ...process.env, PROCCTL_DAEMON_REPORT: '1' }, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`procctld --version exited ${r.status}: ${r.stderr}`);
  return { stdout: r.stdout, stderr: r.stderr };
}

describe('the daemon bundle (SPEC §19: a restart starts the image again)', () => {
  it('a copy of the package with new file times runs the bundle with its code cache', () => {
    const pkg = packageCopy();
    const r = version(pkg);
    expect(r.stdout.trim()).toBe(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version);
    expect(r.stderr).toMatch(/running the bundle .*procctld\.cjs with its code cache/);
  });

  it('one compiled module changed since the bundle was made: the compiled sources run, with the change', () => {
    const pkg = packageCopy();
    const main = join(pkg, 'dist', 'src', 'daemon', 'main.js');
    const text = readFileSync(main, 'utf8');
    expect(text).toContain('.version(packageVersion())');
    writeFileSync(main, text.replace('.version(packageVersion())', ".version('9.9.9-changed')"));
    const r = version(pkg);
    expect(r.stdout.trim()).toBe('9.9.9-changed');
    expect(r.stderr).toMatch(/running the compiled sources: .*main\.js changed since the bundle was made/);
  });
});
