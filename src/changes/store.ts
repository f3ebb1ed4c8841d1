import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { threadId } from 'node:worker_threads';
import { z } from 'zod';
import { conflict, invalid, notFound } from '../base/errors.js';
import { ManifestSchema, type Manifest } from './types.js';

export const ReviewStateSchema = z.enum(['pending', 'applied', 'discarded', 'undone']);
export type ReviewState = z.infer<typeof ReviewStateSchema>;

/**
 * A session's review as it is kept on disk (one JSON file per session): its state, the paths
 * applied so far (an apply of some paths leaves the rest pending), and the manifest of every
 * step apply took, which undo reads. Partial applies append to it.
 */
export const ReviewRecordSchema = z.strictObject({
  v: z.literal(1),
  sessionId: z.string(),
  state: ReviewStateSchema,
  applied: z.array(z.string()),
  manifest: ManifestSchema,
  updatedAt: z.string(),
});
export type ReviewRecord = z.infer<typeof ReviewRecordSchema>;

// A session id becomes a file name: letters, digits, '-', '_' and '.', not starting with '.'.
const SAFE_ID = /^[A-Za-z0-9_-][A-Za-z0-9._-]{0,127}$/;

/**
 * The reviews of a daemon under one directory. Each change of state passes through here, once:
 * apply and discard only from pending, undo only after an apply, anything else a `conflict`.
 * Every write is a whole new file renamed over the old one, so a crash leaves one or the other.
 */
export class ReviewStore {
  constructor(readonly dir: string) {}

  /** Start a review (a session's changes are pending), or the one it has. */
  open(sessionId: string): ReviewRecord {
    try {
      return this.get(sessionId);
    } catch (err) {
      if ((err as { kind?: string }).kind !== 'not_found') throw err;
    }
    return this.write({ v: 1, sessionId, state: 'pending', applied: [], manifest: [], updatedAt: '' });
  }

  /** Whether a session's review has a record (it was settled pending once). */
  has(sessionId: string): boolean {
    return existsSync(this.file(sessionId));
  }

  /** The review of a session; not_found when it has none, invalid when its file does not parse. */
  get(sessionId: string): ReviewRecord {
    let text: string;
    try {
      text = readFileSync(this.file(sessionId), 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') throw notFound(`session ${sessionId} has no changes held for review`);
      throw err;
    }
    const parsed = ReviewRecordSchema.safeParse(safeJson(text));
    if (!parsed.success) throw invalid(`the review record of session ${sessionId} is damaged: ${parsed.error.issues[0]?.message ?? 'not JSON'}`);
    return parsed.data;
  }

  /**
   * Record an apply: of every path (`paths` undefined: the review becomes applied) or of some
   * (it stays pending for the rest). Applying what is not pending, or a path again, is a conflict.
   */
  applied(sessionId: string, manifest: Manifest, paths?: readonly string[]): ReviewRecord {
    const r = this.get(sessionId);
    if (r.state !== 'pending') throw conflict(`the changes of session ${sessionId} are ${r.state}, not pending: there is nothing to apply`, { state: r.state });
    const again = paths?.filter((p) => r.applied.includes(p)) ?? [];
    if (again.length > 0) throw conflict(`already applied: ${again.join(', ')}`, { paths: again });
    return this.write({
      ...r,
      state: paths === undefined ? 'applied' : 'pending',
      applied: paths === undefined ? r.applied : [...r.applied, ...paths],
      manifest: [...r.manifest, ...manifest],
    });
  }

  /** Record a discard of what is still pending; what an earlier apply of some paths wrote stays. */
  discarded(sessionId: string): ReviewRecord {
    const r = this.get(sessionId);
    if (r.state !== 'pending') throw conflict(`the changes of session ${sessionId} are ${r.state}, not pending: there is nothing to discard`, { state: r.state });
    return this.write({ ...r, state: 'discarded' });
  }

  /** Check an undo may start: after an apply (a discard of the rest after applying some too), not while some paths are pending. */
  undoable(sessionId: string): ReviewRecord {
    const r = this.get(sessionId);
    if (r.state === 'pending' && r.applied.length > 0) throw conflict(`some changes of session ${sessionId} are still pending: apply or discard them before undoing`, { state: r.state });
    const appliedSome = r.state === 'applied' || (r.state === 'discarded' && r.manifest.length > 0);
    if (!appliedSome) throw conflict(`the changes of session ${sessionId} are ${r.state}: only applied changes can be undone`, { state: r.state });
    return r;
  }

  /** Record an undo (whatever it left as conflicts stays as the person has it). */
  undone(sessionId: string): ReviewRecord {
    return this.write({ ...this.undoable(sessionId), state: 'undone' });
  }

  /** Forget a session's review (its session is removed). */
  remove(sessionId: string): void {
    rmSync(this.file(sessionId), { force: true });
  }

  private file(sessionId: string): string {
    if (!SAFE_ID.test(sessionId)) throw invalid(`not a session id: ${JSON.stringify(sessionId)}`);
    return join(this.dir, `${sessionId}.json`);
  }

  private write(r: ReviewRecord): ReviewRecord {
    const record = ReviewRecordSchema.parse({ ...r, updatedAt: new Date().toISOString() });
    const file = this.file(r.sessionId);
    mkdirSync(this.dir, { recursive: true, mode: 0o700 });
    // The changes' thread writes records too (changes/jobs.ts): its own temporary name.
    const tmp = `${file}.${process.pid}.${threadId}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(record)}\n`, { mode: 0o600 });
    renameSync(tmp, file);
    return record;
  }
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
