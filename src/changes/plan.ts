import { fstatSync, lstatSync, type BigIntStats } from 'node:fs';
import { WorkspaceDirs } from './dirs.js';
import { Listing } from './listing.js';
import { typeOf } from './overlay.js';
import { baseOf, parentOf, shown, toBytes, unsafeName } from './paths.js';
import type { Action, Change, ChangeSet, PlanEntry, UpperFacts } from './types.js';

export interface PlanOptions {
  /** Only these paths (and what is under them); the directories they need are added. */
  paths?: readonly string[];
  /** Apply conflicts too (never refusals). */
  force?: boolean;
  /** When the session started: the reference time where the filesystem keeps no birth time. */
  sessionStartMs: number;
}

type Rule = { rule: string; refuses: (c: Change, f: UpperFacts) => string | undefined };

/**
 * What apply refuses, whatever `force` says, first match winning. docs/review.md shows this
 * table; each row is a way a hostile job could reach outside the workspace or plant something
 * a person would not expect from a review.
 */
export const REFUSALS: readonly Rule[] = [
  { rule: 'absolute or ".." names', refuses: (c) => unsafeName(c.path) },
  { rule: 'overlay marks not followed', refuses: (_c, f) => f.overlayMark && `an overlay ${f.overlayMark} mark (the daemon mounts with ${f.overlayMark} off; this upper directory was not made by it)` },
  { rule: 'device nodes', refuses: (c) => (c.type === 'char' || c.type === 'block' ? `a ${c.type} device node` : undefined) },
  { rule: 'sockets', refuses: (c) => (c.type === 'socket' ? 'a socket' : undefined) },
  { rule: 'FIFOs', refuses: (c) => (c.type === 'fifo' ? 'a FIFO' : undefined) },
  {
    rule: 'setuid/setgid files',
    refuses: (c) => (c.type === 'file' && (c.mode ?? 0) & 0o6000 ? `a ${(c.mode ?? 0) & 0o4000 ? 'setuid' : 'setgid'} file (mode ${octal(c.mode ?? 0)}): clear the bit in the session to apply it` : undefined),
  },
  {
    rule: 'hard links to files outside the changes',
    refuses: (c, f) => (c.type === 'file' && f.nlink > f.linksInUpper ? `a hard link to a file outside the changes (${f.nlink} links, ${f.linksInUpper} of them here)` : undefined),
  },
];

/**
 * The plan of an apply: one row per change, saying what apply will do with it, or why it will
 * not (refuse: never; conflict: only with `force`). Nothing is written here; the workspace is
 * only looked at (through WorkspaceDirs, so a symlinked directory is seen as one).
 */
export function plan(changes: Pick<ChangeSet, 'files' | 'facts'>, workspace: string, options: PlanOptions): PlanEntry[] {
  const dirs = new WorkspaceDirs(workspace);
  const rows = new Map<string, PlanEntry>();
  const sessionStartNs = BigInt(Math.round(options.sessionStartMs)) * 1_000_000n;
  const look = new Looker(dirs, changes.files);
  try {
    for (const c of changes.files) {
      const f = changes.facts.get(c.path) ?? { btimeNs: 0n, nlink: 1, linksInUpper: 1 };
      rows.set(c.path, row(c, f, dirs, look, rows, f.btimeNs > 0n ? f.btimeNs : sessionStartNs, options.force ?? false));
    }
  } finally {
    dirs.close();
  }
  return options.paths ? select([...rows.values()], options.paths) : [...rows.values()];
}

/**
 * What the workspace holds at a changed path now: an lstat through the directory's descriptor,
 * skipped for names a listing of the directory (read once where many of its names are asked
 * about, listing.ts) shows are not there.
 */
class Looker {
  private readonly asked = new Map<string, number>();
  private readonly listings = new Map<string, Listing | undefined>();

  constructor(
    private readonly dirs: WorkspaceDirs,
    files: readonly Change[],
  ) {
    for (const c of files) {
      const parent = parentOf(c.path);
      this.asked.set(parent, (this.asked.get(parent) ?? 0) + 1);
    }
  }

  now(path: string): BigIntStats | undefined {
    const at = this.dirs.at(path);
    if (typeof at !== 'string' && !Buffer.isBuffer(at)) return undefined;
    const parent = parentOf(path);
    let listed = this.listings.get(parent);
    if (!this.listings.has(parent)) {
      const state = this.dirs.dir(parent);
      listed = 'fd' in state ? Listing.of(`/proc/self/fd/${state.fd}`, this.asked.get(parent) ?? 0, fstatSync(state.fd).size) : undefined;
      this.listings.set(parent, listed);
    }
    if (listed && !listed.has(toBytes(baseOf(path)))) return undefined;
    return lstatSync(at, { bigint: true, throwIfNoEntry: false });
  }
}

function row(c: Change, f: UpperFacts, dirs: WorkspaceDirs, look: Looker, rows: Map<string, PlanEntry>, since: bigint, force: boolean): PlanEntry {
  const refuse = (why: string): PlanEntry => ({ path: c.path, kind: c.kind, action: 'refuse', why });
  for (const r of REFUSALS) {
    const why = r.refuses(c, f);
    if (why) return refuse(why);
  }
  const entry: PlanEntry = { path: c.path, kind: c.kind, action: actionOf(c) };
  if (c.mode !== undefined && entry.action !== 'delete' && entry.action !== 'symlink') entry.mode = c.mode & ~0o6000;
  if (c.type === 'dir' && (c.mode ?? 0) & 0o6000) entry.why = 'the setuid/setgid bits of a directory are not carried (a setgid parent gives them as it would to any mkdir)';
  // The directory it lands in: made by this plan, or a real directory of the workspace now.
  const parent = parentOf(c.path);
  const made = rows.get(parent);
  if (made?.action === 'refuse') return refuse(`its directory ${shown(parent)} is refused`);
  if (made?.action === 'conflict') return conflictOr(entry, `its directory ${shown(parent)} is a conflict`, force);
  if (made?.action !== 'mkdir') {
    const state = dirs.dir(parent);
    if ('why' in state) return refuse(state.why);
    if ('absent' in state) return refuse(`its directory ${shown(parent)} is no longer in the workspace`);
  }
  const now = look.now(c.path);
  const why = conflictWhy(c, now, since);
  if (c.kind === 'deleted' && !now && !why) return { ...entry, why: 'already gone from the workspace: nothing to do' };
  return why ? conflictOr(entry, why, force) : entry;
}

/** Why the workspace's entry now says someone else changed the path since the session did. */
function conflictWhy(c: Change, now: BigIntStats | undefined, since: bigint): string | undefined {
  if (c.oldType === undefined) {
    if (!now || (c.type === 'dir' && now.isDirectory())) return undefined;
    return `the workspace now has a ${typeOf(now)} there, which the session did not see`;
  }
  if (!now) return c.kind === 'deleted' ? undefined : `the workspace no longer has it (the session changed a ${c.oldType})`;
  if (typeOf(now) !== c.oldType) return `the workspace now has a ${typeOf(now)} there, not the ${c.oldType} the session changed`;
  if (now.ctimeNs > since) return 'changed in the workspace since the session first wrote it';
  return undefined;
}

const conflictOr = (entry: PlanEntry, why: string, force: boolean): PlanEntry =>
  force ? { ...entry, why: `forced over a conflict: ${why}` } : { ...entry, action: 'conflict', why };

function actionOf(c: Change): Action {
  if (c.kind === 'deleted') return 'delete';
  if (c.kind === 'mode') return 'chmod';
  if (c.type === 'dir') return 'mkdir';
  if (c.type === 'symlink') return 'symlink';
  return 'write';
}

/** The rows asked for (a path and everything under it), with the mkdirs they need first. */
function select(rows: PlanEntry[], paths: readonly string[]): PlanEntry[] {
  const wanted = (p: string) => paths.some((q) => p === q || p.startsWith(`${q.replace(/\/+$/, '')}/`));
  const byPath = new Map(rows.map((r) => [r.path, r]));
  const keep = new Set<string>();
  for (const r of rows) {
    if (!wanted(r.path)) continue;
    keep.add(r.path);
    for (let p = parentOf(r.path); p !== ''; p = parentOf(p)) {
      const up = byPath.get(p);
      if (up && up.kind !== 'mode') keep.add(p);
    }
  }
  return rows.filter((r) => keep.has(r.path));
}

const octal = (mode: number) => `0${mode.toString(8)}`;
