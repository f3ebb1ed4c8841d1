import { readdirSync, statSync, type Dirent } from 'node:fs';
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

/** `dir/name` for a directory already absolute and normal (path.join normalises again: slower, in a walk of thousands). */
function child(dir: string, name: string): string {
  return dir.endsWith('/') ? dir + name : `${dir}/${name}`;
}

/** Listings of directories that have not changed since they were read, by path. */
const listings = new Map<string, { dev: number; ino: number; ctimeMs: number; entries: readonly Dirent[] }>();
const MAX_LISTINGS = 50_000;
/** A listing is kept only when the directory's last change is older than this at the read (see listing). */
const SETTLED_MS = 2000;

/**
 * A directory's entries, as now. Adding, removing or renaming an entry changes the directory's
 * ctime, so a listing read earlier is still exact while the directory's device, inode and ctime
 * are the same: one stat instead of a read, for the trees sessions start in again and again.
 * The ctime, not the mtime: a job can set a directory's mtime back (utimes) after changing it,
 * and setting it moves the ctime to now. A listing is kept only when the directory had not
 * changed for SETTLED_MS before it was read: a change in the same tick of the file system's
 * clock as the read would leave the ctime as it was (git's "racily clean" entries, the same way
 * out).
 */
function listing(dir: string): readonly Dirent[] {
  const st = statSync(dir, { throwIfNoEntry: false });
  if (!st?.isDirectory()) return [];
  const known = listings.get(dir);
  if (known && known.dev === st.dev && known.ino === st.ino && known.ctimeMs === st.ctimeMs) return known.entries;
  let entries: Dirent[];
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return [];
  }
  if (Date.now() - st.ctimeMs > SETTLED_MS) {
    if (listings.size >= MAX_LISTINGS) listings.clear();
    listings.set(dir, { dev: st.dev, ino: st.ino, ctimeMs: st.ctimeMs, entries });
  } else listings.delete(dir);
  return entries;
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

  const list = (dir: string): readonly Dirent[] => {
    const found = listing(dir);
    entries += found.length;
    return found;
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
      const path = child(dir, e.name);
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
