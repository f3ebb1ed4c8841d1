import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { conflict } from '../base/errors.js';
import { apply, type ApplyResult } from './apply.js';
import { diff, type DiffPage } from './diff.js';
import { plan } from './plan.js';
import { ReviewStore, type ReviewState } from './store.js';
import type { Change, ChangeSet, Totals } from './types.js';
import { undo, type UndoResult } from './undo.js';
import { read } from './upper.js';
import { removeWork } from './work.js';

/**
 * What reads and writes a review's files for `process changes`, apply, discard and undo, from
 * plain data: the files, and the review's record (store.ts: whether it may happen, and what was
 * done, with apply's manifest, ten thousand steps for ten thousand files, which undo reads). Each
 * runs on the changes' thread (thread.ts), where a tree of ten thousand files holds no other
 * client, or in line where that thread cannot run; held.ts keeps where each review stands.
 */

/** Where one review's files are: its directory (upper/, work/, originals/), its record's (the store's), its workspace, and how its upper marks are written. */
export interface ReviewAt {
  id: string;
  dir: string;
  store: string;
  workspace: string;
  xattrs: 'trusted' | 'user';
}

export const NO_TOTALS: Totals = { files: 0, added: 0, modified: 0, deleted: 0, bytes: 0 };

export type ChangesJob =
  | { kind: 'changes'; at: ReviewAt; paths?: string[]; stat?: boolean; offset?: number; limit?: number }
  | { kind: 'totals'; at: ReviewAt }
  | { kind: 'apply'; at: ReviewAt; paths?: string[]; force?: boolean; sessionStartMs: number }
  | { kind: 'discard'; at: ReviewAt }
  | { kind: 'undo'; at: ReviewAt };

export interface ChangesRead {
  files: Change[];
  totals: Totals;
  diff?: DiffPage;
}

/** An apply's answer: what it did, without the manifest (kept in the review's record). */
export type Applied = Omit<ApplyResult, 'manifest'>;

/**
 * What each job answers: `state`, the review's once it is done; `totals`, what its upper
 * directory then holds (a pending review's summary).
 */
export type JobAnswer<J extends ChangesJob> = J extends { kind: 'changes' }
  ? ChangesRead
  : J extends { kind: 'totals' }
    ? Totals
    : J extends { kind: 'apply' }
    ? { result: Applied; state: ReviewState; totals: Totals }
    : J extends { kind: 'undo' }
      ? { result: UndoResult; state: ReviewState; totals: Totals }
      : { state: ReviewState };

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
    case 'totals':
      return readUpper(job.at).totals;
    case 'apply': {
      const store = new ReviewStore(job.at.store);
      const id = job.at.id;
      // Whether it may happen is settled before anything is written: pending, and no path asked for twice.
      const before = store.get(id);
      if (before.state !== 'pending') throw conflict(`the changes of session ${id} are ${before.state}, not pending: there is nothing to apply`, { state: before.state });
      const again = job.paths?.filter((p) => before.applied.includes(p)) ?? [];
      if (again.length > 0) throw conflict(`already applied: ${again.join(', ')}`, { paths: again });
      const set = readUpper(job.at);
      // What an earlier apply of some paths wrote is not planned again.
      const done = new Set(before.applied);
      const files = done.size === 0 ? set.files : set.files.filter((f) => !done.has(f.path));
      const rows = plan({ files, facts: set.facts }, job.at.workspace, { paths: job.paths, force: job.force, sessionStartMs: job.sessionStartMs });
      const { manifest, ...result } = apply(rows, { workspace: job.at.workspace, upper: upperOf(job.at), originals: join(job.at.dir, 'originals') });
      // Only what was written counts as applied; conflicts and failures stay pending (force, or discard).
      const whole = job.paths === undefined && result.conflicts.length === 0 && result.failed.length === 0;
      const record = store.applied(id, manifest, whole ? undefined : result.applied.map((a) => a.path));
      return { result, state: record.state, totals: pendingTotals(job.at, record.state) };
    }
    case 'discard': {
      const record = new ReviewStore(job.at.store).discarded(job.at.id);
      // What the job wrote goes; originals an earlier apply of some paths kept stay for undo.
      try {
        rmSync(upperOf(job.at), { recursive: true, force: true });
        removeWork(join(job.at.dir, 'work'));
      } catch {
        // Discarded all the same: what cannot be removed now goes with the session.
      }
      return { state: record.state };
    }
    case 'undo': {
      const store = new ReviewStore(job.at.store);
      const r = store.undoable(job.at.id);
      const result = undo(r.manifest, { workspace: job.at.workspace, originals: join(job.at.dir, 'originals') });
      const record = store.undone(job.at.id);
      return { result, state: record.state, totals: pendingTotals(job.at, record.state) };
    }
  }
}

/** What is still pending once a job left the review `state`: read again only where some is. */
function pendingTotals(at: ReviewAt, state: ReviewState): Totals {
  return state === 'pending' ? readUpper(at).totals : NO_TOTALS;
}

function totalsOf(files: readonly Change[]): Totals {
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
