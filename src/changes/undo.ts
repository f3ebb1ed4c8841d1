import { closeSync, constants, fchmodSync, lstatSync, openSync, rmdirSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { WorkspaceDirs } from './dirs.js';
import { holds, move } from './keep.js';
import type { Manifest, ManifestEntry, PathWhy } from './types.js';

export interface UndoOptions {
  workspace: string;
  /** The directory apply kept the originals in. */
  originals: string;
}

export interface UndoResult {
  restored: string[];
  conflicts: PathWhy[];
}

/**
 * Undo an apply from its manifest, last step first: where the workspace still holds exactly
 * what apply wrote (the same inode, size, mtime and mode; for a deletion, still nothing), put
 * back what was there before, or remove what apply added. Anything else is a conflict, listed
 * and left as it is: an edit made after the apply is never thrown away.
 */
export function undo(manifest: Manifest, options: UndoOptions): UndoResult {
  const result: UndoResult = { restored: [], conflicts: [] };
  const dirs = new WorkspaceDirs(options.workspace);
  try {
    for (const entry of [...manifest].reverse()) {
      try {
        const why = undoOne(entry, dirs, options.originals);
        if (why) result.conflicts.push({ path: entry.path, why });
        else result.restored.push(entry.path);
      } catch (err) {
        result.conflicts.push({ path: entry.path, why: `${(err as NodeJS.ErrnoException).code ?? 'error'}: ${(err as Error).message}` });
      }
    }
  } finally {
    dirs.close();
  }
  return result;
}

/** Undo one step; a reason when it must be left alone. */
function undoOne(entry: ManifestEntry, dirs: WorkspaceDirs, originals: string): string | undefined {
  const at = dirs.at(entry.path);
  if (typeof at !== 'string' && !Buffer.isBuffer(at)) return 'why' in at ? at.why : 'its directory is no longer in the workspace';
  const now = lstatSync(at, { bigint: true, throwIfNoEntry: false });
  if (entry.wrote === null) {
    if (now) return 'the workspace has something there again since the apply deleted it';
  } else if (!now || !holds(now, entry.wrote)) {
    return now ? 'changed in the workspace since the apply wrote it' : 'removed from the workspace since the apply wrote it';
  }
  const original = entry.original;
  if (original !== 'absent' && 'mode' in original) {
    const fd = openSync(at, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    try {
      fchmodSync(fd, original.mode);
    } finally {
      closeSync(fd);
    }
    return undefined;
  }
  // Take away what apply wrote, unless a file renamed back over it replaces it in one step.
  const wroteDir = entry.wrote?.type === 'dir';
  const renameOver = original !== 'absent' && !wroteDir && original.type !== 'dir';
  if (entry.wrote && !renameOver) {
    if (wroteDir) {
      try {
        rmdirSync(at);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOTEMPTY') return 'the directory holds files the apply did not write';
        throw err;
      }
    } else unlinkSync(at);
    dirs.forget(entry.path);
  }
  if (original !== 'absent') move(join(originals, original.kept), at);
  return undefined;
}
