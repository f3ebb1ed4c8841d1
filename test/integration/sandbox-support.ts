import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import { filterProblem } from '../../src/sandbox/seccomp.js';
import { markedProcesses } from '../helpers/state.js';
import { killLeftovers } from '../helpers/procs.js';

/**
 * Whether bubblewrap can make a sandbox here, and if not why: the sandbox tests need it (CI
 * installs it from .ci/run) and say so when they skip.
 */
export function bwrapHere(): { ok: true } | { ok: false; why: string } {
  const run = spawnSync('bwrap', ['--ro-bind', '/', '/', '--dev', '/dev', '--proc', '/proc', '--unshare-pid', '--unshare-net', 'true'], { encoding: 'utf8', timeout: 10_000 });
  if (run.error) return { ok: false, why: `bwrap is not installed (${run.error.message}); apt-get install -y bubblewrap` };
  if (run.status !== 0) return { ok: false, why: `bwrap cannot make a sandbox here: ${run.stderr.trim()}` };
  const filter = filterProblem();
  if (filter) return { ok: false, why: `the sandbox's seccomp filter cannot be made here: ${filter}` };
  return { ok: true };
}

const here = bwrapHere();
export const SKIP_SANDBOX = !here.ok;
if (!here.ok) process.stderr.write(`skipping sandbox tests: ${here.why}\n`);

/** Why curl cannot drive the network tests here (undefined when it can): they say so and skip (.ci/run installs it). */
export const NO_CURL = (() => {
  const run = spawnSync('curl', ['--version'], { stdio: 'ignore' });
  return run.error || run.status !== 0 ? 'curl is not installed (Debian: apt-get install -y curl)' : undefined;
})();

/**
 * A directory for one test file's workspaces outside the private /tmp a sandbox mounts over
 * (/var/tmp, else the home directory), so a job inside sees what the test put there.
 */
export function hostScratch(prefix: string): string {
  return mkdtempSync(join(existsSync('/var/tmp') ? '/var/tmp' : homedir(), prefix));
}

/** A fresh directory for one test file (outside any daemon's), removed by `cleanup`. */
export function scratchRoot(prefix: string): { root: string; dir: (name: string) => string; cleanup: () => void } {
  const root = mkdtempSync(join(tmpdir(), prefix));
  return {
    root,
    dir: (name) => {
      const d = join(root, name);
      mkdirSync(d, { recursive: true });
      return d;
    },
    cleanup: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** Kill (by pid) anything still carrying these sessions' marker; return what was found. */
export function killMarked(ids: Iterable<string>): number[] {
  const pids = markedProcesses(ids).map((m) => m.pid);
  killLeftovers(pids);
  return pids;
}
