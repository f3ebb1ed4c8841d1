import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { apply, type ApplyResult } from './apply.js';
import { diff, type DiffPage } from './diff.js';
import { plan } from './plan.js';
import type { Change, ChangeSet, Manifest, Totals } from './types.js';
import { undo, type UndoResult } from './undo.js';
import { read } from './upper.js';
import { removeWork } from './work.js';

/**
 * What reads and writes a review's files for `process changes`, apply, discard and undo, from
 * plain data (held.ts decides whether they may happen and records what they did): each runs on
 * the changes' thread (thread.ts), where a tree of ten thousand files holds no other client, or
 * in line where that thread cannot run.
 */

/** Where one review's files are: its directory (upper/, work/, originals/), its workspace, and how its upper marks are written. */
export interface ReviewAt {
  dir: string;
  workspace: string;
  xattrs: 'trusted' | 'user';
}

export const NO_TOTALS: Totals = { files: 0, added: 0, modified: 0, deleted: 0, bytes: 0 };

export type ChangesJob =
  | { kind: 'changes'; at: ReviewAt; paths?: string[]; stat?: boolean; offset?: number; limit?: number }
  /** `done`: paths an earlier apply of some paths wrote, not planned again. */
  | { kind: 'apply'; at: ReviewAt; done: string[]; paths?: string[]; force?: boolean; sessionStartMs: number }
  | { kind: 'discard'; at: ReviewAt }
  | { kind: 'undo'; at: ReviewAt; manifest: Manifest };

export interface ChangesRead {
  files: Change[];
  totals: Totals;
  diff?: DiffPage;
}

/** What each job answers; `totals`: what the upper directory holds once it is done (a pending review's summary). */
export type JobAnswer<J extends ChangesJob> = J extends { kind: 'changes' }
  ? ChangesRead
  : J extends { kind: 'apply' }
    ? { result: ApplyResult; totals: Totals }
    : J extends { kind: 'undo' }
      ? { result: UndoResult; totals: Totals }
      : Record<string, never>;

const upperOf = (at: ReviewAt) => join(at.dir, 'upper');

/** What the session's upper directory holds (nothing once discarded). */
export function readUpper(at: ReviewAt): ChangeSet {
  const upper = upperOf(at);
  if (!existsSync(upper)) return { files: [], totals: NO_TOTALS, facts: new Map() };
  return read(upper, at.workspace, { xattrs: at.xattrs });
}

export function runJob<J extends ChangesJob>(job: J): JobAnswer<J> {
  return run(job) as JobAnswer<J>;
}

function run(job: ChangesJob): unknown {
  switch (job.kind) {
    case 'changes': {
      const set = readUpper(job.at);
      const wanted = job.paths;
      const files = wanted ? set.files.filter((f) => wanted.some((w) => f.path === w || f.path.startsWith(`${w}/`))) : set.files;
      const answer: ChangesRead = { files, totals: wanted ? totalsOf(files) : set.totals };
      if (!job.stat) answer.diff = diff(files, upperOf(job.at), job.at.workspace, { offset: job.offset, limit: job.limit });
      return answer;
    }
    case 'apply': {
      const set = readUpper(job.at);
      const done = new Set(job.done);
      const files = done.size === 0 ? set.files : set.files.filter((f) => !done.has(f.path));
      const rows = plan({ files, facts: set.facts }, job.at.workspace, { paths: job.paths, force: job.force, sessionStartMs: job.sessionStartMs });
      const result = apply(rows, { workspace: job.at.workspace, upper: upperOf(job.at), originals: join(job.at.dir, 'originals') });
      return { result, totals: readUpper(job.at).totals };
    }
    case 'discard':
      // What the job wrote goes; originals an earlier apply of some paths kept stay for undo.
      try {
        rmSync(upperOf(job.at), { recursive: true, force: true });
        removeWork(join(job.at.dir, 'work'));
      } catch {
        // Discarded all the same: what cannot be removed now goes with the session.
      }
      return {};
    case 'undo': {
      const result = undo(job.manifest, { workspace: job.at.workspace, originals: join(job.at.dir, 'originals') });
      return { result, totals: readUpper(job.at).totals };
    }
  }
}

export function totalsOf(files: readonly Change[]): Totals {
  const t = { ...NO_TOTALS };
  for (const f of files) {
    t.files++;
    if (f.kind === 'added') t.added++;
    else if (f.kind === 'deleted') t.deleted++;
    else t.modified++;
    t.bytes += f.size ?? 0;
  }
  return t;
}
