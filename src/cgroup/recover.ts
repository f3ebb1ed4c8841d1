import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { childDirs, readPids, removeTree, treeOf, writeFile } from './files.js';
import type { CgroupLayout } from './host.js';

const SESSION_DIR = /^s-[a-z0-9]{1,32}$/;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * SIGKILL everything in these cgroup directories of one session, with nothing but the directory
 * names (the guardian after the daemon died, the next start after a crash): cgroup.kill where
 * the kernel has it, each listed process otherwise, and a frozen v1 freezer thawed so the kill lands.
 */
export function killDirs(dirs: readonly string[]): void {
  for (const dir of dirs) {
    if (existsSync(join(dir, 'cgroup.kill'))) {
      try {
        writeFile(join(dir, 'cgroup.kill'), '1');
        continue;
      } catch {
        // gone, or refused: one by one below
      }
    }
    for (const pid of readPids(dir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    if (existsSync(join(dir, 'freezer.state'))) {
      try {
        writeFile(join(dir, 'freezer.state'), 'THAWED');
      } catch {
        // gone
      }
    }
  }
}

/** Session cgroups present in the daemon's subtrees, by name (`s-ID`), each with its directories. */
function sessionDirs(layout: CgroupLayout): Map<string, string[]> {
  const found = new Map<string, string[]>();
  const roots = [...new Set([...(layout.v2 ? [layout.v2] : []), ...Object.values(layout.v1)])];
  for (const root of roots) {
    for (const name of childDirs(root)) {
      if (!SESSION_DIR.test(name)) continue;
      found.set(name, [...(found.get(name) ?? []), join(root, name)]);
    }
  }
  return found;
}

/**
 * At start, before any session runs: every session cgroup a previous run of this daemon left
 * (it was SIGKILLed, or the machine lost power mid-stop) is emptied and removed, so nothing a
 * previous run started lives on. Returns the session ids found, those whose cgroups still held a
 * process (killed now), and the directories that would not go within `withinMs` (named in the
 * log). `keep`: the ids of sessions handed over by a planned restart (SPEC §19), whose cgroups
 * are not leftovers.
 */
export async function emptyLeftovers(layout: CgroupLayout, withinMs = 5000, keep: ReadonlySet<string> = new Set()): Promise<{ sessions: string[]; held: string[]; stuck: string[] }> {
  const found = sessionDirs(layout);
  // The cgroups of sessions a planned restart handed to this image are theirs still.
  for (const name of [...found.keys()]) if (keep.has(name.slice(2))) found.delete(name);
  if (found.size === 0) return { sessions: [], held: [], stuck: [] };
  const held = [...found].filter(([, dirs]) => dirs.flatMap(treeOf).some((dir) => readPids(dir).length > 0)).map(([name]) => name.slice(2));
  const stuck = await killAndRemove([...found.values()].flat(), withinMs);
  return { sessions: [...found.keys()].map((n) => n.slice(2)), held, stuck };
}

/**
 * SIGKILL what is in these cgroups (and in any cgroup a job made below them) and remove them,
 * children first, again and again (the pauses growing to 100 ms) until they are gone or
 * `withinMs` has passed: a killed process leaves its cgroup only once the kernel has ended it.
 * Returns those still there.
 */
export async function killAndRemove(dirs: readonly string[], withinMs: number): Promise<string[]> {
  let left = [...dirs];
  const deadline = Date.now() + withinMs;
  for (let pause = 5; left.length > 0; pause = Math.min(pause * 2, 100)) {
    killDirs(left.flatMap(treeOf));
    left = left.filter((dir) => !removeTree(dir));
    if (left.length === 0 || Date.now() > deadline) break;
    await sleep(pause);
  }
  return left;
}
