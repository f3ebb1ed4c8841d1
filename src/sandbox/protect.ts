import { join } from 'node:path';
import { child, Listings, type Listing } from './listings.js';

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
  /** Shared by every start the same answer is given to: read, never changed. */
  readonly paths: readonly Protected[];
  /** Why the walk stopped short, when it did: the answer says so. */
  truncated?: string;
}

/** The listings every walk reads through: kept while their directories are unchanged. */
const shared = new Listings();
/** By the listings they were read through, the last answer for each set of roots and patterns: it holds while every listing it was made of is watched and unchanged. */
const answersOf = new WeakMap<Listings, Map<string, { generation: number; result: ProtectResult }>>();
const MAX_ANSWERS = 64;

/**
 * What `sandbox.protect` keeps read-only in a writable tree (SPEC §12), at any depth, found now:
 * every entry named by a pattern (`.envrc`, `.vscode`, ...), and in every git directory (the
 * tree's `.git`, nested repositories', and submodules' under `.git/modules`) its `config` and
 * `hooks`, with the git directory itself pinned. Symbolic links are not followed. A pattern is a
 * name (matched at any depth) or `.git/**\/NAME` (NAME inside any git directory).
 */
export function findProtected(roots: readonly string[], patterns: readonly string[], listings: Listings = shared): ProtectResult {
  listings.refresh();
  for (const root of roots) listings.checkRoot(root);
  const key = `${roots.join('\0')}\0\0${patterns.join('\0')}`;
  let answers = answersOf.get(listings);
  if (answers === undefined) answersOf.set(listings, (answers = new Map()));
  const known = answers.get(key);
  if (known && known.generation === listings.generation) return known.result;
  const generation = listings.generation;
  let exact = true;
  const names = new Set(patterns.filter((p) => !p.includes('/')));
  const inGit = new Set(patterns.filter((p) => p.startsWith('.git/')).map((p) => p.split('/').pop()!));
  const paths: Protected[] = [];
  let entries = 0;
  let truncated: string | undefined;
  /** A path longer than the system takes was met (nothing there can be bound either): said with the answer. */
  let tooLong = false;

  /**
   * A directory's listing; where what is in it cannot be known, the directory (or the one above it,
   * when it cannot even be looked at) is read-only whole and the listing says nothing to walk.
   */
  const list = (dir: string, from: 'root' | Listing): Listing => {
    const found = listings.list(dir, from);
    if (!found.watched) exact = false;
    entries += found.entries.length;
    if (found.tooLong) tooLong = true;
    else if (found.unreachable) unreadable(from === 'root' ? dir : from.path);
    else if (found.unreadable) unreadable(dir);
    else return found;
    return { ...found, entries: [] };
  };

  /**
   * A directory the daemon cannot list (a job that runs as the daemon's user can `chmod 000` one to
   * hide what is in it from this walk): read-only whole, so nothing in it can be written, nor its
   * mode put back from inside.
   */
  const wholly = new Set<string>();
  const unreadable = (dir: string) => {
    if (wholly.has(dir)) return;
    wholly.add(dir);
    paths.push({ path: dir, how: 'ro' });
  };

  /** A git directory: pinned, its protected entries read-only, and its submodules' in turn. */
  const gitDir = (dir: string, top: boolean, from: Listing) => {
    // Pinned first: a git directory that cannot be listed is then read-only whole over the pin.
    paths.push({ path: dir, how: 'pin' });
    const inside = list(dir, from);
    for (const name of inGit) {
      const e = inside.entries.find((x) => x.name === name);
      if (e) paths.push({ path: join(dir, name), how: 'ro' });
      // No hooks yet at the top: an empty read-only one, so none can be added.
      else if (top && name === 'hooks') paths.push({ path: join(dir, name), how: 'empty' });
    }
    if (!inside.entries.some((x) => x.name === 'modules' && x.isDirectory())) return;
    const modules = list(join(dir, 'modules'), inside);
    for (const m of modules.entries) if (m.isDirectory()) modulesDir(join(dir, 'modules', m.name), 1, modules);
  };
  /** Under `.git/modules`: a submodule's git directory, or a directory of them (nested names). */
  const modulesDir = (dir: string, depth: number, from: Listing) => {
    const inside = list(dir, from);
    if (inside.entries.some((x) => x.name === 'HEAD')) return gitDir(dir, false, from);
    if (depth < MAX_DEPTH) for (const e of inside.entries) if (e.isDirectory()) modulesDir(join(dir, e.name), depth + 1, inside);
  };

  const walk = (dir: string, depth: number, from: 'root' | Listing) => {
    if (truncated) return;
    if (entries > MAX_ENTRIES) {
      truncated = `more than ${MAX_ENTRIES} entries under ${roots.join(', ')}: paths past them are not protected`;
      return;
    }
    const here = list(dir, from);
    for (const e of here.entries) {
      const path = child(dir, e.name);
      if (e.name === '.git') {
        if (e.isDirectory()) gitDir(path, true, here);
        // A worktree's or submodule's `.git` file names its git directory: keep it pointing there.
        else if (e.isFile()) paths.push({ path, how: 'ro' });
        continue;
      }
      if (names.has(e.name) && (e.isFile() || e.isDirectory())) {
        paths.push({ path, how: 'ro' });
        continue;
      }
      if (e.isDirectory() && !SKIP.has(e.name)) {
        if (depth < MAX_DEPTH) walk(path, depth + 1, here);
      }
    }
  };
  for (const root of roots) walk(root, 0, 'root');
  const long = tooLong ? `paths under ${roots.join(', ')} longer than the system takes are not protected (shorten the names of the directories on the way to them)` : undefined;
  const said = [truncated, long].filter((x) => x !== undefined).join('; ');
  const result: ProtectResult = { paths, ...(said ? { truncated: said } : {}) };
  if (exact && generation === listings.generation) {
    if (answers.size >= MAX_ANSWERS) answers.clear();
    answers.set(key, { generation, result });
  }
  return result;
}
