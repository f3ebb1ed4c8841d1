import { closeSync, constants, fchmodSync, fchownSync, fstatSync, lchownSync, lstatSync, mkdirSync, openSync, readdirSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { linkAt, renameAt, statAt, writeBeside } from './at.js';
import { WorkspaceDirs, named } from './dirs.js';
import { fingerprint, keepByLink, move } from './keep.js';
import { asName, baseOf, parentOf } from './paths.js';
import type { Action, Fingerprint, Manifest, ManifestEntry, PathWhy, PlanEntry } from './types.js';

export interface ApplyOptions {
  /** The real workspace the changes are written into. */
  workspace: string;
  /** The session's upper directory the written content comes from. */
  upper: string;
  /** Where what apply replaces or deletes is kept (made if missing), for undo. */
  originals: string;
  /** fsync each written file before it replaces the old one (slower; safer across a power cut). */
  fsync?: boolean;
}

export interface ApplyResult {
  applied: { path: string; action: Action }[];
  refused: PathWhy[];
  conflicts: PathWhy[];
  /** Rows apply started and could not finish (the system said no); nothing of them is half-written. */
  failed: PathWhy[];
  manifest: Manifest;
}

/** Thrown inside apply for a row the workspace or upper no longer allows; listed as refused. */
class Refusal extends Error {}

/**
 * Write a plan into the real workspace, row by row in its order (a directory before what is in
 * it). Files are written beside their target under a temporary name and renamed over it; what
 * is replaced or deleted is kept under `originals` first and every step is recorded in the
 * manifest. Every name is reached through its directory's descriptor (WorkspaceDirs), and
 * symlinks are made as symlinks: nothing is written through a symlink.
 */
export function apply(plan: readonly PlanEntry[], options: ApplyOptions): ApplyResult {
  const result: ApplyResult = { applied: [], refused: [], conflicts: [], failed: [], manifest: [] };
  const dirs = new WorkspaceDirs(options.workspace);
  const uppers = new WorkspaceDirs(options.upper);
  mkdirSync(options.originals, { recursive: true, mode: 0o700 });
  const originals = openSync(options.originals, constants.O_RDONLY | constants.O_DIRECTORY);
  const asRoot = process.getuid?.() === 0;
  // Numbered after what an earlier apply of some paths of the same session kept there.
  let kept = readdirSync(options.originals).reduce((most, n) => Math.max(most, Number(n) || 0), 0);
  // Originals are named by number: a flat directory whatever the workspace's names are.
  const keepName = () => String(++kept).padStart(6, '0');
  const tempName = () => `.procctl-apply-${process.pid}-${kept}-${Math.random().toString(36).slice(2, 8)}`;

  const step = (row: PlanEntry): ManifestEntry | undefined => {
    const at = dirs.at(row.path);
    if (typeof at !== 'string' && !Buffer.isBuffer(at)) throw new Refusal('why' in at ? at.why : 'its directory is not in the workspace');
    const parentFd = (dirs.dir(parentOf(row.path)) as { fd: number }).fd;
    const base = asName(baseOf(row.path));
    const old = statAt(parentFd, base);
    // The upper directory too is reached one directory at a time, never through a symlink.
    const src = uppers.at(row.path);
    if (typeof src !== 'string' && !Buffer.isBuffer(src)) throw new Refusal('its directory in the session\'s changes is not a directory');
    // Keep what is there: a link when a file or symlink is replaced by its like, else moved away.
    const keep = (replacedByLike: boolean): ManifestEntry['original'] => {
      if (!old) return 'absent';
      const name = keepName();
      const type = old.type;
      if (replacedByLike && (type === 'file' || type === 'symlink')) keepByLink(at, join(options.originals, name), type, () => linkAt(parentFd, base, originals, name));
      else {
        move(at, join(options.originals, name));
        dirs.forget(row.path);
      }
      return { kept: name, type };
    };
    // Whose what is made here is, for root: the owner of what it replaces, else of its directory.
    const ownerOf = () => {
      if (!asRoot) return undefined;
      const from = old ?? dirs.parentStat(row.path);
      return from && { uid: Number(from.uid), gid: Number(from.gid) };
    };
    const owner = (fd: number | undefined, path?: string | Buffer) => {
      const to = ownerOf();
      if (!to) return;
      if (fd !== undefined) fchownSync(fd, to.uid, to.gid);
      else lchownSync(path!, to.uid, to.gid);
    };
    // Put the new entry (`tmp`, beside it) in place once the old one is kept; a failure leaves no temporary behind.
    const replace = (tmp: string, keepOld: () => ManifestEntry['original']) => {
      try {
        const original = keepOld();
        renameAt(parentFd, tmp, parentFd, base);
        return original;
      } catch (err) {
        rmSync(named(parentFd, tmp), { force: true });
        throw err;
      }
    };
    switch (row.action) {
      case 'write': {
        const upperFd = (uppers.dir(parentOf(row.path)) as { fd: number }).fd;
        const tmp = tempName();
        // The job that wrote it is gone: its size as the descriptor says is all there is to copy.
        const wrote = writeBeside(upperFd, base, parentFd, tmp, row.mode ?? 0o644, ownerOf(), options.fsync === true);
        if (!wrote) throw new Refusal('the upper entry is no longer a regular file');
        return { path: row.path, action: row.action, wrote, original: replace(tmp, () => keep(old?.type !== 'dir')) };
      }
      case 'symlink': {
        const target = readlinkSync(src, { encoding: 'buffer' });
        const tmp = tempName();
        symlinkSync(target, named(parentFd, tmp));
        owner(undefined, named(parentFd, tmp));
        const wrote = fingerprint(lstatSync(named(parentFd, tmp), { bigint: true }));
        return { path: row.path, action: row.action, wrote, original: replace(tmp, () => keep(old?.type !== 'dir')) };
      }
      case 'mkdir': {
        if (old?.type === 'dir') return undefined;
        const original = keep(false);
        mkdirSync(at, { mode: 0o700 });
        dirs.forget(row.path);
        const made = dirs.dir(row.path);
        if (!('fd' in made)) throw new Refusal('the directory made is not there');
        fchmodSync(made.fd, row.mode ?? 0o755);
        owner(made.fd);
        return { path: row.path, action: row.action, wrote: fingerprint(fstatSync(made.fd, { bigint: true })), original };
      }
      case 'delete': {
        if (!old) return undefined;
        return { path: row.path, action: row.action, wrote: null, original: keep(false) };
      }
      case 'chmod': {
        if (!old || (old.type !== 'file' && old.type !== 'dir')) throw new Refusal('the workspace no longer has a file or directory there');
        const fd = openSync(at, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
        try {
          const was = fstatSync(fd, { bigint: true });
          fchmodSync(fd, row.mode ?? Number(was.mode) & 0o7777);
          return { path: row.path, action: row.action, wrote: fingerprint(fstatSync(fd, { bigint: true })), original: { mode: Number(was.mode) & 0o7777 } };
        } finally {
          closeSync(fd);
        }
      }
      default:
        throw new Refusal(`nothing to do for action ${row.action}`);
    }
  };

  try {
    for (const row of plan) {
      if (row.action === 'refuse') result.refused.push({ path: row.path, why: row.why ?? 'refused' });
      else if (row.action === 'conflict') result.conflicts.push({ path: row.path, why: row.why ?? 'a conflict' });
      else {
        try {
          const done = step(row);
          if (done) result.manifest.push(done);
          result.applied.push({ path: row.path, action: row.action });
        } catch (err) {
          const why = err instanceof Refusal ? err.message : `${(err as NodeJS.ErrnoException).code ?? 'error'}: ${(err as Error).message}`;
          (err instanceof Refusal ? result.refused : result.failed).push({ path: row.path, why });
        }
      }
    }
  } finally {
    dirs.close();
    uppers.close();
    closeSync(originals);
  }
  return result;
}
