import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './daemon.js';

/** What running the package needs: its programs, their compiled code, its dependencies and the addon. */
const PARTS = ['package.json', 'bin', 'dist', 'node_modules', 'build', 'prebuilds'];

const made: string[] = [];

/**
 * A place another user can run this checkout from: the checkout itself when that user can read
 * it, else a copy (hard links where the file system allows) in a directory anyone may enter. A
 * clone under a 0700 directory (a home directory, `mktemp -d`) cannot be run by anyone else.
 */
export function checkoutFor(uid: number): { root: string; copied: boolean } {
  const probe = spawnSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--', 'test', '-r', join(ROOT, 'bin', 'procctld')]);
  if (probe.status === 0) return { root: ROOT, copied: false };
  const root = mkdtempSync(join(tmpdir(), 'procctl-checkout-'));
  chmodSync(root, 0o755);
  made.push(root);
  for (const part of PARTS.filter((p) => existsSync(join(ROOT, p)))) {
    const linked = spawnSync('cp', ['-al', join(ROOT, part), root]);
    if (linked.status !== 0) {
      const copied = spawnSync('cp', ['-a', join(ROOT, part), root], { encoding: 'utf8' });
      if (copied.status !== 0) throw new Error(`cannot copy ${part} for uid ${uid}: ${copied.stderr}`);
    }
  }
  // Hard links share their modes with the checkout's files: nothing is chmodded here.
  return { root, copied: true };
}

/** Remove the copies made. */
export function removeCheckouts(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}
