import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { mkdir, readdir, rename, rm, unlink } from 'node:fs/promises';
import { isAbsolute, join, relative } from 'node:path';
import { z } from 'zod';
import { conflict, notFound, ProcctlError, unavailable } from '../base/errors.js';
import type { DiffPage } from './diff.js';
import { NO_TOTALS, readUpper, type Applied, type ReviewAt } from './jobs.js';
import { ReviewStore, type ReviewState } from './store.js';
import { ChangesThread } from './thread.js';
import type { Change, Totals } from './types.js';
import type { UndoResult } from './undo.js';
import { clearWorkLater, removeReviewDir, removeReviewDirLater } from './work.js';

/**
 * The changes review sessions hold (SPEC §16), one directory each under `<state>/changes/<id>`:
 * `layout.json` (which workspace, since when, which overlay marks), `upper/` and `work/` (the
 * overlay's), `originals/` (what an apply replaced, for undo), and the review's state in
 * `<state>/changes/<id>.json` (store.ts). Reading, planning and writing are changes/' other
 * files; this one knows where a session's are and what may happen next.
 */

const LayoutSchema = z.strictObject({
  v: z.literal(1),
  workspace: z.string(),
  startedAt: z.number(),
  xattrs: z.enum(['trusted', 'user']),
  /** An approval rule said review (SPEC §16): the changes wait for a person, and only a person applies them. */
  approval: z.literal(true).optional(),
  /** The workspace root's permission bits when the session began, which its upper root was given. */
  rootMode: z.number().int().nonnegative().optional(),
});
type Layout = z.infer<typeof LayoutSchema>;

/** Where a review session's changes stand, as list and poll show them. */
export interface HeldSummary {
  state: 'running' | ReviewState | 'none';
  pending: boolean;
  files: number;
  bytes: number;
  /** Why its changes could not be read; they can still be discarded. */
  error?: string;
}

export interface ChangesAnswer {
  workspace: string;
  state: HeldSummary['state'];
  files: Change[];
  totals: Totals;
  diff?: DiffPage;
  /** The session changed the workspace root's own mode: shown, not carried by apply (paths are relative to the root). */
  root?: RootChange;
}

export interface RootChange {
  mode: number;
  oldMode: number;
}

export interface ApplyAnswer extends Applied {
  workspace: string;
  state: ReviewState;
  /** Not carried: see ChangesAnswer.root. */
  root?: RootChange;
}

/** The name a held-nothing review's directory takes while it is removed (never a session id: ids do not start with '.'). */
const TRASH = '.removing-';
/** A review directory made ahead (its upper/ and work/), taken by the next review session. */
const SPARE = '.spare-';

/** Spare review directories kept at most: enough for reviews that follow one another. */
const MAX_SPARES = 2;


export class HeldChanges {
  private readonly root: string;
  private readonly store: ReviewStore;
  private readonly summaries = new Map<string, HeldSummary>();
  /** Layouts read or written by this daemon: a layout never changes once written. */
  private readonly layouts = new Map<string, Layout>();
  /** Directories of reviews that held nothing, being removed off the answer's path. */
  private removing = 0;
  /**
   * Review directories ready for the next review sessions: made ahead off the request's path, or
   * a finished review's that held nothing, emptied of the kernel's leftovers (MAX_SPARES at most).
   */
  private readonly spares: string[] = [];
  private making = false;
  /** Held-nothing reviews' directories being made spares. */
  private recycling = 0;
  private named = 0;
  /** Tells this keeper's spares from another's in the same process (tests) or an earlier run. */
  private readonly stamp = Date.now().toString(36);
  /** Where changes are read, applied, discarded and undone: off the daemon's thread. */
  private readonly thread = new ChangesThread();
  /**
   * Each review's work under way (a read, an apply, a discard, an undo) and what waits behind it:
   * one at a time per review, in the order asked, each deciding whether it may happen only once
   * the one before it is done (a discard asked during an apply finds the changes applied).
   */
  private readonly busy = new Map<string, Promise<void>>();
  /** What settleOff read of a review a rule holds for a person, until statNow puts it in their question. */
  private readonly readForQuestion = new Map<string, { files: Change[]; totals: Totals }>();
  private stopping = false;

  constructor(stateDir: string) {
    this.root = join(stateDir, 'changes');
    this.store = new ReviewStore(this.root);
  }

  dirOf(id: string): string {
    return join(this.root, id);
  }

  /**
   * A review session starts: its layout is written before its job runs, so a crash leaves enough
   * to review what it wrote, and whether a person must answer for it (`approval`).
   */
  begin(id: string, workspace: string, startedAt: number, o: { approval?: boolean; from?: string; rootMode?: number } = {}): HeldSummary {
    const layout: Layout = {
      v: 1,
      workspace,
      startedAt,
      xattrs: process.getuid?.() === 0 ? 'trusted' : 'user',
      ...(o.approval ? { approval: true as const } : {}),
      ...(o.rootMode !== undefined ? { rootMode: o.rootMode } : {}),
    };
    const dir = this.dirOf(id);
    if (o.from === undefined) this.makeDir(dir);
    else renameSync(o.from, dir);
    const file = join(dir, 'layout.json');
    writeFileSync(`${file}.tmp`, `${JSON.stringify(layout)}\n`, { mode: 0o600 });
    renameSync(`${file}.tmp`, file);
    this.layouts.set(id, layout);
    return this.note(id, { state: 'running', pending: false, files: 0, bytes: 0 });
  }

  /**
   * A review session's directory with its overlay's `upper/` and `work/` (0700): the one made
   * ahead when there is one (one rename on the request's path instead of four mkdirs, about
   * 0.4 ms of every review exec), else made now; the next is then made in the background.
   */
  private makeDir(dir: string): void {
    const spare = this.spares.pop();
    let made = false;
    if (spare) {
      try {
        renameSync(spare, dir);
        made = true;
      } catch {
        // Gone (a restart's load removed it): made here instead.
      }
    }
    if (!made) {
      mkdirSync(join(dir, 'upper'), { recursive: true, mode: 0o700 });
      mkdirSync(join(dir, 'work'), { mode: 0o700 });
    }
    this.makeSpare();
  }

  /**
   * A review directory for an overlay mounted ahead of its session (runner/premount.ts): a spare
   * taken out of the pool (made now when there is none), given to `begin` as `from` once a
   * session takes the mount, or to `dropSpare` when none does.
   */
  takeSpare(): string {
    const spare = this.spares.pop();
    this.makeSpare();
    if (spare !== undefined) return spare;
    const dir = this.spareName();
    mkdirSync(join(dir, 'upper'), { recursive: true, mode: 0o700 });
    mkdirSync(join(dir, 'work'), { mode: 0o700 });
    return dir;
  }

  /** A spare taken for a mount no session took, its mount gone with its namespace: removed off the caller's path. */
  dropSpare(dir: string): void {
    this.removeLater(dir);
  }

  private makeSpare(): void {
    if (this.making || this.spares.length > 0) return;
    this.making = true;
    const dir = this.spareName();
    mkdir(join(dir, 'upper'), { recursive: true, mode: 0o700 })
      .then(() => mkdir(join(dir, 'work'), { mode: 0o700 }))
      .then(
        () => {
          this.spares.push(dir);
        },
        () => {
          // The state directory refuses writes now: the next review makes its own, and says so if it cannot.
          rm(dir, { recursive: true, force: true }).catch(() => undefined);
        },
      )
      .finally(() => {
        this.making = false;
      });
  }

  /**
   * Its job ended (or the daemon found it after a restart): what it wrote becomes pending, or
   * nothing is held. Read here, in line: at start, before any client is served.
   */
  settle(id: string): HeldSummary | undefined {
    const to = this.toSettle(id);
    if (!('layout' in to)) return to.summary;
    let totals: Totals;
    try {
      totals = this.read(id, to.layout).totals;
    } catch (err) {
      return this.unreadable(id, err);
    }
    return this.hold(id, totals);
  }

  /**
   * As settle, the upper tree read on the changes' thread: a job that wrote ten thousand files
   * left 0.1-0.2 s of reads that held every client's request where it ended. Where the thread
   * takes no more jobs (the daemon is stopping) it is read here.
   */
  settleOff(id: string): Promise<HeldSummary | undefined> {
    if (this.stopping) return new Promise((resolve) => resolve(this.settle(id)));
    // In the review's turn: a look, an apply or a discard asked meanwhile waits for it, then finds it pending.
    return this.inTurn(id, async () => {
      const to = this.toSettle(id);
      if (!('layout' in to)) return to.summary;
      let totals: Totals;
      try {
        const at = this.at(id, to.layout);
        if (this.needsApproval(id)) {
          // A rule holds it for a person: the paths their question lists are read in the same pass.
          const read = await this.thread.run({ kind: 'changes', at, stat: true });
          // Kept only for a review still here (not forgotten while it was read).
          if (read.totals.files > 0 && this.layouts.has(id)) this.readForQuestion.set(id, read);
          totals = read.totals;
        } else totals = await this.thread.run({ kind: 'totals', at });
      } catch (err) {
        // The thread was closed under it (the daemon is stopping): read here, never called unreadable.
        if (this.stopping || (err instanceof ProcctlError && err.kind === 'unavailable')) return this.settle(id);
        return this.unreadable(id, err);
      }
      return this.hold(id, totals);
    });
  }

  /**
   * Settling failed past reading (its record could not be written: the state directory refuses):
   * pending all the same, with why, here as on the session, so a discard can still drop them.
   */
  failedToSettle(id: string, err: Error): HeldSummary {
    return this.note(id, { state: 'pending', pending: true, files: 0, bytes: 0, error: `its changes could not be settled: ${err.message}; discard them` });
  }

  /** What settling review `id` reads: its layout; else what it is without a read (none: undefined; a record, found at start: as it says). */
  private toSettle(id: string): { layout: Layout } | { summary: HeldSummary | undefined } {
    const layout = this.layout(id);
    if (!layout) return { summary: undefined };
    // A review this daemon saw begin has no record until now; one found at start may have.
    const record = this.summaries.get(id)?.state === 'running' ? undefined : this.record(id);
    return record ? { summary: this.note(id, this.summaryOf(record.state, layout, id)) } : { layout };
  }

  /** What the job left cannot be read (a tree deeper than a path can name, a directory it shut): held, and said. */
  private unreadable(id: string, err: unknown): HeldSummary {
    this.store.open(id);
    return this.note(id, { state: 'pending', pending: true, files: 0, bytes: 0, error: `its changes cannot be read: ${(err as Error).message}; discard them` });
  }

  /** Pending with what its upper directory holds, or nothing held. */
  private hold(id: string, totals: Totals): HeldSummary {
    if (totals.files === 0) {
      this.dropEmpty(id);
      return this.note(id, { state: 'none', pending: false, files: 0, bytes: 0 });
    }
    this.store.open(id);
    return this.note(id, { state: 'pending', pending: true, files: totals.files, bytes: totals.bytes });
  }

  /** Whether these changes wait for a person's approval (an approval rule said review): only a person applies them. */
  needsApproval(id: string): boolean {
    return this.layout(id)?.approval === true;
  }

  /** Where the changes go: the workspace the session's overlay covered. */
  workspaceOf(id: string): string | undefined {
    return this.layout(id)?.workspace;
  }

  summary(id: string): HeldSummary | undefined {
    return this.summaries.get(id);
  }

  /**
   * A review that held nothing: its directory is renamed out of the way at once (one rename: the
   * session's answer does not wait for it), then made the next review's spare off the answer's
   * path (nothing in its upper directory, not even an empty directory; the kernel's leftovers
   * taken out of its work directory, its layout removed), or removed when enough spares wait.
   * Removing the kernel's three directories of a volatile overlay took 1.3 ms in line on an ext4
   * without a journal, and a removal and three mkdirs for the next review more than that. A
   * recycle or removal that fails or is cut short by a restart is finished by the next `load`.
   */
  private dropEmpty(id: string): void {
    this.layouts.delete(id);
    const gone = join(this.root, `${TRASH}${id}-${process.pid}-${this.removing++}`);
    try {
      renameSync(this.dirOf(id), gone);
    } catch {
      removeReviewDir(this.dirOf(id));
      return;
    }
    if (this.spares.length + this.recycling >= MAX_SPARES) return this.removeLater(gone);
    this.recycling++;
    this.recycle(gone)
      .then(
        (spare) => this.spares.push(spare),
        () => this.removeLater(gone),
      )
      .finally(() => this.recycling--);
  }

  private removeLater(dir: string): void {
    removeReviewDirLater(dir).catch(() => {
      // Left for the next start's load, which removes what this could not.
    });
  }

  private spareName(): string {
    return join(this.root, `${SPARE}${process.pid}-${this.stamp}-${this.named++}`);
  }

  /** A held-nothing review's directory (renamed aside) made a spare: its name, or rejected when it does not fit. */
  private async recycle(dir: string): Promise<string> {
    const empty = async () => {
      if ((await readdir(join(dir, 'upper'))).length > 0) throw new Error('its upper directory is not empty');
    };
    await empty();
    await clearWorkLater(join(dir, 'work'));
    await unlink(join(dir, 'layout.json'));
    // Again just before: a process the session left (no cgroup to end it) may have written meanwhile.
    await empty();
    const spare = this.spareName();
    await rename(dir, spare);
    return spare;
  }

  /**
   * At start: every review a previous run left, settled (a job the crash ended is pending like any
   * other). One whose job outlived that run (`running(id)`: its processes are being stopped) is
   * `running` until they are gone, then settled by the caller: nothing is shown or applied while
   * a job may still write.
   */
  load(each: (id: string, summary: HeldSummary) => void, running: (id: string) => boolean = () => false): void {
    if (!existsSync(this.root)) return;
    for (const name of readdirSync(this.root)) {
      if (name.startsWith(TRASH) || name.startsWith(SPARE)) {
        removeReviewDir(join(this.root, name));
        continue;
      }
      if (!existsSync(join(this.root, name, 'layout.json'))) continue;
      if (running(name) && !this.store.has(name)) {
        each(name, this.note(name, { state: 'running', pending: false, files: 0, bytes: 0 }));
        continue;
      }
      let summary: HeldSummary | undefined;
      try {
        summary = this.settle(name);
      } catch (err) {
        // One review's files never keep the daemon from starting.
        summary = { state: 'pending', pending: true, files: 0, bytes: 0, error: `its review could not be read at start: ${(err as Error).message}` };
      }
      if (summary) each(name, summary);
    }
  }

  /** What the session changed, with its diff unless `stat`: read on the changes' thread. */
  changes(id: string, o: { paths?: readonly string[]; stat?: boolean; offset?: number; limit?: number } = {}): Promise<ChangesAnswer> {
    return this.inTurn(id, async () => {
      const layout = this.mustLayout(id);
      const state = this.summaries.get(id)?.state ?? 'pending';
      if (state === 'none') return { workspace: layout.workspace, state, files: [], totals: NO_TOTALS };
      const paths = o.paths?.map((p) => this.relative(layout, p));
      const read = await this.thread.run({ kind: 'changes', at: this.at(id, layout), paths, stat: o.stat, offset: o.offset, limit: o.limit });
      return { workspace: layout.workspace, state, files: read.files, totals: read.totals, ...(read.diff ? { diff: read.diff } : {}), ...this.rootChange(id, layout) };
    });
  }

  /**
   * What the session changed, paths and totals, for the question a person is asked as its job
   * ends, which is set before anyone is told of the end: as its settle read them on the changes'
   * thread (settleOff), or read here, in line, where it was settled in line (at start).
   */
  statNow(id: string): ChangesAnswer {
    const layout = this.mustLayout(id);
    const state = this.summaries.get(id)?.state ?? 'pending';
    const read = this.readForQuestion.get(id);
    this.readForQuestion.delete(id);
    if (state === 'none') return { workspace: layout.workspace, state, files: [], totals: NO_TOTALS };
    const set = read ?? this.read(id, layout);
    return { workspace: layout.workspace, state, files: set.files, totals: set.totals, ...this.rootChange(id, layout) };
  }

  apply(id: string, o: { paths?: readonly string[]; force?: boolean } = {}): Promise<ApplyAnswer> {
    return this.inTurn(id, async () => {
      const layout = this.mustLayout(id);
      this.pendingOr(id, 'apply');
      // The record is read, checked and written there too: with ten thousand files its manifest is megabytes.
      const asked = o.paths?.map((p) => this.relative(layout, p));
      const { result, state, totals } = await this.thread.run({ kind: 'apply', at: this.at(id, layout), paths: asked, force: o.force, sessionStartMs: layout.startedAt }).catch(this.recheck(id, layout));
      this.note(id, summaryFrom(state, totals));
      return { ...result, workspace: layout.workspace, state, ...this.rootChange(id, layout) };
    });
  }

  /** Resolves once no review's work is under way: a restart waits for it before the image goes. */
  async settled(): Promise<void> {
    while (this.busy.size > 0) await Promise.all(this.busy.values());
  }

  /**
   * The daemon stops: no more work is taken, what is under way finishes (an apply cut short
   * would lose its manifest), within `deadlineMs` (a workspace on a file system that stopped
   * answering must not hold the stop forever), and the thread ends. The reviews still under way
   * at the deadline, or none.
   */
  async close(deadlineMs: number): Promise<string[]> {
    this.stopping = true;
    let timer: NodeJS.Timeout | undefined;
    const done = await Promise.race([this.settled().then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), deadlineMs)))]);
    clearTimeout(timer);
    const left = done ? [] : [...this.busy.keys()];
    await this.thread.close();
    return left;
  }

  /** `work` once the review's work before it is done, whether that succeeded or not. */
  private inTurn<T>(id: string, work: () => Promise<T>): Promise<T> {
    if (this.stopping) return Promise.reject(unavailable('the daemon is stopping: nothing was read or written; ask again once it is back'));
    const mine = (this.busy.get(id) ?? Promise.resolve()).then(work);
    const tail = mine.then(
      () => undefined,
      () => undefined,
    );
    this.busy.set(id, tail);
    void tail.then(() => {
      if (this.busy.get(id) === tail) this.busy.delete(id);
    });
    return mine;
  }

  /**
   * A job that failed (refused, or its thread died under it): where the review stands is read
   * again from its record, which may say it was done, and the error goes on to the caller.
   */
  private recheck(id: string, layout: Layout): (err: Error) => never {
    return (err) => {
      try {
        const r = this.record(id);
        if (r && this.summaries.has(id)) this.note(id, this.summaryOf(r.state, layout, id));
      } catch {
        // The record cannot be read: the summary stays as it was, and the error says what failed.
      }
      throw err;
    };
  }

  private at(id: string, layout: Layout): ReviewAt {
    return { id, dir: this.dirOf(id), store: this.store.dir, workspace: layout.workspace, xattrs: layout.xattrs };
  }

  /** `{root}` when the session changed the workspace root's own mode, else nothing. */
  private rootChange(id: string, layout: Layout): { root?: RootChange } {
    if (layout.rootMode === undefined) return {};
    try {
      const mode = lstatSync(join(this.dirOf(id), 'upper')).mode & 0o7777;
      return mode === layout.rootMode ? {} : { root: { mode, oldMode: layout.rootMode } };
    } catch {
      return {};
    }
  }

  /** `files`: how many were pending when they were dropped. */
  discard(id: string): Promise<{ workspace: string; state: ReviewState; files: number }> {
    return this.inTurn(id, async () => {
      const layout = this.mustLayout(id);
      this.pendingOr(id, 'discard');
      const files = this.summaries.get(id)?.files ?? 0;
      const { state } = await this.thread.run({ kind: 'discard', at: this.at(id, layout) }).catch(this.recheck(id, layout));
      this.note(id, summaryFrom(state, NO_TOTALS));
      return { workspace: layout.workspace, state, files };
    });
  }

  undo(id: string): Promise<UndoResult & { workspace: string; state: ReviewState }> {
    return this.inTurn(id, async () => {
      const layout = this.mustLayout(id);
      const { result, state, totals } = await this.thread.run({ kind: 'undo', at: this.at(id, layout) }).catch(this.recheck(id, layout));
      this.note(id, summaryFrom(state, totals));
      return { ...result, workspace: layout.workspace, state };
    });
  }

  /**
   * The session is forgotten: its changes, kept originals and review go with it, at once, or
   * once the work under way on them is done (an apply is never cut short by its own directory going).
   */
  remove(id: string): void {
    const gone = () => {
      this.readForQuestion.delete(id);
      this.layouts.delete(id);
      this.summaries.delete(id);
      removeReviewDir(this.dirOf(id));
      this.store.remove(id);
    };
    const under = this.busy.get(id);
    if (!under) return gone();
    // After the work under way (its turn, whatever it gives): nothing new comes for a forgotten session.
    this.layouts.delete(id);
    this.summaries.delete(id);
    this.readForQuestion.delete(id);
    void under.then(() => {
      try {
        gone();
      } catch {
        // Left for the next start's load, which removes what holds nothing and names what does.
      }
    });
  }

  private note(id: string, summary: HeldSummary): HeldSummary {
    this.summaries.set(id, summary);
    return summary;
  }

  private summaryOf(state: ReviewState, layout: Layout, id: string): HeldSummary {
    return summaryFrom(state, state === 'pending' ? this.read(id, layout).totals : NO_TOTALS);
  }

  private read(id: string, layout: Layout) {
    return readUpper(this.at(id, layout));
  }

  private record(id: string) {
    try {
      return this.store.get(id);
    } catch (err) {
      if ((err as { kind?: string }).kind === 'not_found') return undefined;
      throw err;
    }
  }

  private pendingOr(id: string, what: string): void {
    const s = this.summaries.get(id);
    if (s?.state === 'running') throw conflict(`session ${id} is still running: its changes can be ${what === 'apply' ? 'applied' : 'discarded'} once it has ended`, { state: 'running' });
    if (s?.state === 'none') throw conflict(`session ${id} changed nothing in its workspace: there is nothing to ${what}`, { state: 'none' });
  }

  private layout(id: string): Layout | undefined {
    const known = this.layouts.get(id);
    if (known) return known;
    try {
      const layout = LayoutSchema.parse(JSON.parse(readFileSync(join(this.dirOf(id), 'layout.json'), 'utf8')));
      this.layouts.set(id, layout);
      return layout;
    } catch {
      return undefined;
    }
  }

  private mustLayout(id: string): Layout {
    const layout = this.layout(id);
    if (layout) return layout;
    const s = this.summaries.get(id);
    if (s?.state === 'none') return { v: 1, workspace: '', startedAt: 0, xattrs: 'trusted' };
    throw notFound(`session ${id} holds no changes for review: it was not run with changes "review"`);
  }

  /** A path as given (relative to the workspace, or absolute under it) as the reader names it. */
  private relative(layout: Layout, path: string): string {
    const rel = isAbsolute(path) ? relative(layout.workspace, path) : path;
    return rel.replace(/^\.\/+/, '').replace(/\/+$/, '');
  }
}

/** Where a review stands once its state is `state` and its upper directory holds `totals`. */
function summaryFrom(state: ReviewState, totals: Totals): HeldSummary {
  if (state !== 'pending') return { state, pending: false, files: 0, bytes: 0 };
  return { state, pending: true, files: totals.files, bytes: totals.bytes };
}
