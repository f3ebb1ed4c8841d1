import { readdirSync, type Dirent } from 'node:fs';
import { join } from 'node:path';

/** How one path of a writable tree is kept: `pin` bound onto itself (it cannot be renamed away and replaced), `ro` read-only, `empty` an empty read-only directory in place of a missing one. */
export interface Protected {
  path: string;
  how: 'pin' | 'ro' | 'empty';
}

/** The walk's bounds: deep enough for any nesting of repositories a person works in, short of a whole disk. */
const MAX_DEPTH = 12;
const MAX_ENTRIES = 200_000;
/** Trees nobody runs git or a shell from: not walked. */
const SKIP = new Set(['node_modules', '.cache', '.npm', '.cargo', '.rustup', '.venv', 'venv', '__pycache__', 'target', 'dist']);

export interface ProtectResult {
  paths: Protected[];
  /** Why the walk stopped short, when it did: the answer says so. */
  truncated?: string;
}

/**
 * What `sandbox.protect` keeps read-only in a writable tree (SPEC §12), at any depth, found now:
 * every entry named by a pattern (`.envrc`, `.vscode`, ...), and in every git directory (the
 * tree's `.git`, nested repositories', and submodules' under `.git/modules`) its `config` and
 * `hooks`, with the git directory itself pinned. Symbolic links are not followed. A pattern is a
 * name (matched at any depth) or `.git/**\/NAME` (NAME inside any git directory).
 */
export function findProtected(roots: readonly string[], patterns: readonly string[]): ProtectResult {
  const names = new Set(patterns.filter((p) => !p.includes('/')));
  const inGit = new Set(patterns.filter((p) => p.startsWith('.git/')).map((p) => p.split('/').pop()!));
  const paths: Protected[] = [];
  let entries = 0;
  let truncated: string | undefined;

  const list = (dir: string): Dirent[] => {
    try {
      const found = readdirSync(dir, { withFileTypes: true });
      entries += found.length;
      return found;
    } catch {
      return [];
    }
  };

  /** A git directory: pinned, its protected entries read-only, and its submodules' in turn. */
  const gitDir = (dir: string, top: boolean) => {
    paths.push({ path: dir, how: 'pin' });
    const inside = list(dir);
    for (const name of inGit) {
      const e = inside.find((x) => x.name === name);
      if (e) paths.push({ path: join(dir, name), how: 'ro' });
      // No hooks yet at the top: an empty read-only one, so none can be added.
      else if (top && name === 'hooks') paths.push({ path: join(dir, name), how: 'empty' });
    }
    const modules = inside.find((x) => x.name === 'modules' && x.isDirectory());
    if (modules) for (const m of list(join(dir, 'modules'))) if (m.isDirectory()) modulesDir(join(dir, 'modules', m.name), 1);
  };
  /** Under `.git/modules`: a submodule's git directory, or a directory of them (nested names). */
  const modulesDir = (dir: string, depth: number) => {
    const inside = list(dir);
    if (inside.some((x) => x.name === 'HEAD')) return gitDir(dir, false);
    if (depth < MAX_DEPTH) for (const e of inside) if (e.isDirectory()) modulesDir(join(dir, e.name), depth + 1);
  };

  const walk = (dir: string, depth: number) => {
    if (truncated) return;
    if (entries > MAX_ENTRIES) {
      truncated = `more than ${MAX_ENTRIES} entries under ${roots.join(', ')}: paths past them are not protected`;
      return;
    }
    for (const e of list(dir)) {
      const path = join(dir, e.name);
      if (e.name === '.git') {
        if (e.isDirectory()) gitDir(path, true);
        // A worktree's or submodule's `.git` file names its git directory: keep it pointing there.
        else if (e.isFile()) paths.push({ path, how: 'ro' });
        continue;
      }
      if (names.has(e.name) && (e.isFile() || e.isDirectory())) {
        paths.push({ path, how: 'ro' });
        continue;
      }
      if (e.isDirectory() && !SKIP.has(e.name)) {
        if (depth < MAX_DEPTH) walk(path, depth + 1);
      }
    }
  };
  for (const root of roots) walk(root, 0);
  return { paths, ...(truncated ? { truncated } : {}) };
}
