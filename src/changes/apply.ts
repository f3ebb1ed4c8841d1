import {
  closeSync,
  constants,
  fchmodSync,
  fchownSync,
  fstatSync,
  fsyncSync,
  futimesSync,
  lchownSync,
  lstatSync,
  mkdirSync,
  openSync,
  readdirSync,
  readlinkSync,
  renameSync,
  rmSync,
  symlinkSync,
} from 'node:fs';
import { join } from 'node:path';
import { WorkspaceDirs, named } from './dirs.js';
import { copyFd, fingerprint, keepByLink, move } from './keep.js';
import { typeOf } from './overlay.js';
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
  const asRoot = process.getuid?.() === 0;
  // Numbered after what an earlier apply of some paths of the same session kept there.
  let kept = readdirSync(options.originals).reduce((most, n) => Math.max(most, Number(n) || 0), 0);
  // Originals are named by number: a flat directory whatever the workspace's names are.
  const keepName = () => String(++kept).padStart(6, '0');
  const temp = (fd: number) => named(fd, `.procctl-apply-${process.pid}-${kept}-${Math.random().toString(36).slice(2, 8)}`);

  const step = (row: PlanEntry): ManifestEntry | undefined => {
    const at = dirs.at(row.path);
    if (typeof at !== 'string' && !Buffer.isBuffer(at)) throw new Refusal('why' in at ? at.why : 'its directory is not in the workspace');
    const parent = dirs.dir(row.path.slice(0, Math.max(0, row.path.lastIndexOf('/'))));
    const parentFd = (parent as { fd: number }).fd;
    const old = lstatSync(at, { bigint: true, throwIfNoEntry: false });
    // The upper directory too is reached one directory at a time, never through a symlink.
    const src = uppers.at(row.path);
    if (typeof src !== 'string' && !Buffer.isBuffer(src)) throw new Refusal('its directory in the session\'s changes is not a directory');
    // Keep what is there: a link when a file or symlink is replaced by its like, else moved away.
    const keep = (replacedByLike: boolean): ManifestEntry['original'] => {
      if (!old) return 'absent';
      const name = keepName();
      const type = typeOf(old);
      if (replacedByLike && (type === 'file' || type === 'symlink')) keepByLink(at, join(options.originals, name), type);
      else {
        move(at, join(options.originals, name));
        dirs.forget(row.path);
      }
      return { kept: name, type };
    };
    const owner = (fd: number | undefined, path?: string | Buffer) => {
      if (!asRoot) return;
      const from = old ?? dirs.parentStat(row.path);
      if (!from) return;
      if (fd !== undefined) fchownSync(fd, Number(from.uid), Number(from.gid));
      else lchownSync(path!, Number(from.uid), Number(from.gid));
    };
    // Put the new entry in place once the old one is kept; a failure leaves no temporary behind.
    const replace = (tmp: string | Buffer, keepOld: () => ManifestEntry['original']) => {
      try {
        const original = keepOld();
        renameSync(tmp, at);
        return original;
      } catch (err) {
        rmSync(tmp, { force: true });
        throw err;
      }
    };
    switch (row.action) {
      case 'write': {
        const input = openSync(src, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
        const tmp = temp(parentFd);
        let wrote: Fingerprint;
        try {
          const st = fstatSync(input, { bigint: true });
          if (!st.isFile()) throw new Refusal('the upper entry is no longer a regular file');
          const out = openSync(tmp, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
          try {
            // The job that wrote it is gone: its size as the descriptor says is all there is to copy.
            copyFd(input, out, Number(st.size));
            fchmodSync(out, row.mode ?? 0o644);
            owner(out);
            futimesSync(out, Number(st.atimeMs) / 1000, Number(st.mtimeNs / 1000n) / 1e6);
            if (options.fsync) fsyncSync(out);
            wrote = fingerprint(fstatSync(out, { bigint: true }));
          } catch (err) {
            rmSync(tmp, { force: true });
            throw err;
          } finally {
            closeSync(out);
          }
        } finally {
          closeSync(input);
        }
        return { path: row.path, action: row.action, wrote, original: replace(tmp, () => keep(!old?.isDirectory())) };
      }
      case 'symlink': {
        const target = readlinkSync(src, { encoding: 'buffer' });
        const tmp = temp(parentFd);
        symlinkSync(target, tmp);
        owner(undefined, tmp);
        const wrote = fingerprint(lstatSync(tmp, { bigint: true }));
        return { path: row.path, action: row.action, wrote, original: replace(tmp, () => keep(!old?.isDirectory())) };
      }
      case 'mkdir': {
        if (old?.isDirectory()) return undefined;
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
        if (!old || (!old.isFile() && !old.isDirectory())) throw new Refusal('the workspace no longer has a file or directory there');
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
  }
  return result;
}
