import { appendFileSync, chmodSync, closeSync, constants, mkdirSync, openSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { readStat } from '../runner/procfs.js';
import { unavailable } from '../base/errors.js';
import { DiskHealth, type DiskState, type WriteKind } from '../session/disk.js';
import { isEnded, parseRecord, type SessionRecord } from '../session/persist.js';

/** While records wait to be written (the directory refused them), they are tried again this often. */
const RETRY_MS = 2000;

/** The journal of ended sessions' records, in the sessions directory (StateStore.appendEnded). */
const JOURNAL = 'ended.jsonl';

/** The journal is rewritten once its dead lines outnumber its live ones by this many and more. */
const COMPACT_SLACK = 256;

export class StateDirInUseError extends Error {}

/** The state directory, first that applies (SPEC §3): config/env, $STATE_DIRECTORY, $XDG_STATE_HOME, ~/.local/state. */
export function resolveStateDir(configured: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  if (configured) return configured;
  // systemd's StateDirectory= may list several, separated by ':'.
  if (env.STATE_DIRECTORY) return env.STATE_DIRECTORY.split(':')[0];
  const base = env.XDG_STATE_HOME || join(env.HOME || homedir(), '.local', 'state');
  return join(base, 'procctl');
}

/**
 * Session records on disk: one JSON file per session, written atomically (temp file + rename),
 * beside its output spool. A torn or corrupt file is set aside with a warning, never fatal.
 * When the directory refuses writes (full, read-only, permissions) the daemon serves from
 * memory: the newest record of each session waits and is written by itself once it can be.
 */
export class StateStore {
  readonly sessionsDir: string;
  /** Every write to the directory reports here: daemon.status tells it, the log says it once. */
  readonly disk: DiskHealth;
  /** Records the directory refused, newest per session, to be written once it takes writes. */
  private readonly unsaved = new Map<string, SessionRecord>();
  private retry: NodeJS.Timeout | undefined;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
  ) {
    this.sessionsDir = join(dir, 'sessions');
    this.disk = new DiskHealth((state, what) => {
      if (state.writable) {
        this.log.info({ stateDir: dir }, 'the state directory takes writes again; records and output are written as before');
      } else {
        this.log.warn(
          { stateDir: dir, err: state.error, what },
          'the state directory does not take writes: serving from memory; records wait and are written once it does, output meanwhile is not spooled',
        );
      }
    });
  }

  status(): DiskState {
    return this.disk.state;
  }

  /**
   * Create the directory and take it: one daemon per state directory, or the second would
   * recover (and terminate) the first one's running sessions as lost.
   */
  init(socketPath: string): void {
    mkdirSync(this.sessionsDir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
    const lock = this.lockPath();
    try {
      const owner = JSON.parse(readFileSync(lock, 'utf8')) as { pid: number; startTime: number; socket: string };
      if (owner.pid !== process.pid && readStat(owner.pid)?.startTime === owner.startTime) {
        throw new StateDirInUseError(
          `another procctld (pid ${owner.pid}, socket ${owner.socket}) uses the state directory ${this.dir}; stop it, or give this one its own with PROCCTL_STATE_DIR`,
        );
      }
    } catch (err) {
      if (err instanceof StateDirInUseError) throw err;
      // no owner, or a stale or unreadable file: take it
    }
    writeFileSync(lock, JSON.stringify({ pid: process.pid, startTime: readStat(process.pid)?.startTime, socket: socketPath }), { mode: 0o600 });
    this.lockFile = lock;
  }

  private lockFile: string | undefined;

  /** The state directory's lock: which daemon holds it (pid, start time, socket). */
  lockPath(): string {
    return join(this.dir, 'daemon.json');
  }

  /** Let the directory go at shutdown. */
  release(): void {
    if (this.lockFile) rmSync(this.lockFile, { force: true });
    this.lockFile = undefined;
  }

  private recordPath(id: string): string {
    return join(this.sessionsDir, `${id}.json`);
  }

  spoolPath(id: string): string {
    return join(this.sessionsDir, `${id}.log`);
  }

  /**
   * Write a session's record now. A record of a session that ended goes to the journal of ended
   * sessions (one appended line); one of a session that runs or waits for its approval goes to
   * its own file, written atomically (temp file + rename).
   */
  save(snap: SessionRecord): void {
    const ended = isEnded(snap);
    const kind = ended ? this.journalKind() : 'file';
    try {
      if (ended) this.appendEnded(snap);
      else {
        const file = this.recordPath(snap.id);
        const tmp = `${file}.tmp`;
        writeFileSync(tmp, JSON.stringify(snap), { mode: 0o600 });
        renameSync(tmp, file);
        this.files.add(snap.id);
      }
    } catch (err) {
      return this.refused(snap, kind, err as Error);
    }
    this.unsaved.delete(snap.id);
    this.disk.succeeded(kind);
  }

  /**
   * The journal of ended sessions (`sessions/ended.jsonl`): a session's final record is one line
   * appended to it, and forgetting a session appends `{"forget": id}`. Records of ended sessions
   * outnumber the others by far (a command that is over in a moment has no other), and on a disk
   * file system creating a file costs ten to a hundred times what appending a line does (0.1 to
   * 0.3 ms against 3 us on ext4 here): per session, that was most of what the daemon added to an
   * `exec`. Later lines win; the journal is rewritten with only the live lines once the dead
   * ones outnumber them, and removed when no ended session is left.
   */
  private journalPath(): string {
    return join(this.sessionsDir, JOURNAL);
  }

  /** The journal's newest line of each ended session it holds. */
  private readonly ended = new Map<string, string>();
  /** Lines in the journal file now (live and dead). */
  private journalLines = 0;
  /** Sessions that have a record file of their own (running, waiting for approval). */
  private readonly files = new Set<string>();

  /** A line for the journal adds to a file there is, or makes it (compacted away, or never written). */
  private journalKind(): WriteKind {
    return this.journalLines > 0 ? 'data' : 'file';
  }

  private append(line: string): void {
    // Opened for each line (3 us): a journal replaced or made read-only is seen at once.
    const fd = openSync(this.journalPath(), constants.O_WRONLY | constants.O_APPEND | constants.O_CREAT | constants.O_NOFOLLOW, 0o600);
    try {
      writeFileSync(fd, line);
    } finally {
      closeSync(fd);
    }
    this.journalLines++;
  }

  private appendEnded(snap: SessionRecord): void {
    const line = `${JSON.stringify(snap)}\n`;
    this.append(line);
    this.ended.set(snap.id, line);
    // The file it had while it ran is out of date now: deleted if it can be (the journal's line
    // wins over it at load in any case).
    if (this.files.delete(snap.id)) {
      try {
        unlinkSync(this.recordPath(snap.id));
      } catch {
        // deleted at the next start
      }
    }
  }

  /**
   * Rewrite the journal with its live lines only once the dead ones outnumber them (`now`: if
   * it has any dead line at all); remove it when no line is live.
   */
  private compact(now = false): void {
    const live = this.ended.size;
    if (live === 0 ? this.journalLines === 0 : this.journalLines <= (now ? live : 2 * live + COMPACT_SLACK)) return;
    const file = this.journalPath();
    if (this.ended.size === 0) {
      rmSync(file, { force: true });
    } else {
      const tmp = `${file}.tmp`;
      writeFileSync(tmp, [...this.ended.values()].join(''), { mode: 0o600 });
      renameSync(tmp, file);
    }
    this.journalLines = this.ended.size;
  }

  /** A record the directory did not take: it waits (the newest of its session) and is tried again. */
  private refused(snap: SessionRecord, kind: WriteKind, err: Error): void {
    this.unsaved.set(snap.id, snap);
    this.disk.failed(kind, err, `the record of session ${snap.id}`);
    this.retry ??= setInterval(() => this.retryUnsaved(), RETRY_MS);
    this.retry.unref();
  }

  private retryUnsaved(): void {
    for (const snap of this.unsaved.values()) {
      this.save(snap);
      if (this.unsaved.has(snap.id)) return; // still refused: the next round tries again
    }
    clearInterval(this.retry);
    this.retry = undefined;
  }

  /**
   * Write a record once the daemon is done with what it is doing now: a finished session's, which
   * nothing waits for (exec has answered by then). Several writes of one session in a turn make
   * one, made when it is written (the session as it is then), and a session removed meanwhile is
   * not written back. The write itself is synchronous:
   * through the thread pool a small file costs four hand-offs between threads (open, write,
   * close, rename), each a wake-up that costs more than the write.
   */
  saveLater(id: string, snap: () => SessionRecord): void {
    this.later.set(id, snap);
    this.laterTurn ??= setImmediate(() => this.writeLater());
  }

  private readonly later = new Map<string, () => SessionRecord>();
  private laterTurn: NodeJS.Immediate | undefined;

  private writeLater(): void {
    clearImmediate(this.laterTurn);
    this.laterTurn = undefined;
    const batch = [...this.later.values()];
    this.later.clear();
    for (const snap of batch) this.save(snap());
  }

  /** Write now every record still waiting for its turn (shutdown). */
  flush(): void {
    if (this.laterTurn) this.writeLater();
  }

  /**
   * Delete a session's record and spool, all or nothing: the record goes first, and if it cannot
   * be deleted nothing is (`unavailable`), so a restart never brings back a session reported gone.
   */
  remove(id: string): void {
    const record = this.recordPath(id);
    const refuse = (kind: WriteKind, err: unknown, what: string) => {
      const e = err as NodeJS.ErrnoException;
      this.disk.failed(kind, e, `the record of session ${id}`);
      return unavailable(
        `session ${id} was not forgotten: its record ${what} cannot be deleted (${e.message}); it stays listed. Make ${this.sessionsDir} writable and try again`,
        { sessionId: id, stateDir: this.dir },
      );
    };
    let forgotten = false;
    if (this.ended.has(id)) {
      const kind = this.journalKind();
      try {
        this.append(`${JSON.stringify({ forget: id })}\n`);
      } catch (err) {
        throw refuse(kind, err, `in ${this.journalPath()}`);
      }
      this.disk.succeeded(kind);
      this.ended.delete(id);
      forgotten = true;
    }
    // Its own record file (it ran on, or waited for its approval). Once the journal has said to
    // forget it, a file left behind is never read back (the journal's word wins at load).
    try {
      unlinkSync(record);
      this.disk.succeeded('file');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' && !forgotten) throw refuse('file', err, record);
    }
    this.files.delete(id);
    this.unsaved.delete(id);
    this.later.delete(id);
    try {
      this.compact();
    } catch (err) {
      this.disk.failed('file', err as Error, 'the journal of ended sessions');
      this.log.warn({ file: this.journalPath(), err: (err as Error).message }, 'cannot compact the journal of ended sessions; it is tried again at the next forget');
    }
    for (const f of [this.spoolPath(id), `${this.spoolPath(id)}.1`]) {
      try {
        rmSync(f, { force: true });
      } catch (err) {
        // The record is gone, so the session is too; the stray spool is deleted at the next start.
        this.log.warn({ file: f, err: (err as Error).message }, 'cannot delete a forgotten session spool');
      }
    }
  }

  /** Stop retrying (shutdown): what is still refused is named in the log. */
  close(): void {
    clearInterval(this.retry);
    this.retry = undefined;
    if (this.unsaved.size > 0) {
      this.log.error({ sessions: [...this.unsaved.keys()], err: this.disk.state.error }, 'these session records could not be written: a restart will not know them');
    }
  }

  /** A record that parsed but cannot be restored: renamed `.corrupt` with a warning. */
  setAside(id: string, why: string): void {
    const line = this.ended.get(id);
    if (line !== undefined) {
      const file = this.journalPath();
      this.log.warn({ file, sessionId: id, err: why }, `skipping a corrupt line of the journal of ended sessions (kept in ${JOURNAL}.corrupt)`);
      try {
        appendFileSync(`${file}.corrupt`, line, { mode: 0o600 });
        this.ended.delete(id);
        this.compact(true);
      } catch {
        // leave it
      }
      return;
    }
    const file = this.recordPath(id);
    this.files.delete(id);
    this.log.warn({ file, err: why }, 'skipping a corrupt session record (renamed to .corrupt)');
    try {
      renameSync(file, `${file}.corrupt`);
    } catch {
      // leave it
    }
  }

  /** The record file of a session that was running, as the last run left it (a crash's adoption); undefined when there is none that says it runs. */
  readRunning(id: string): SessionRecord | undefined {
    try {
      const parsed = parseRecord(JSON.parse(readFileSync(this.recordPath(id), 'utf8')));
      return 'record' in parsed && !isEnded(parsed.record) ? parsed.record : undefined;
    } catch {
      return undefined;
    }
  }

  /**
   * Every readable record; corrupt ones are renamed `*.corrupt` and counted. `running`: sessions
   * this image runs already (a planned restart handed them over, with their records): their files
   * are theirs, not read (a file and a check of its record each, for nothing).
   */
  loadAll(running: ReadonlySet<string> = new Set()): { records: SessionRecord[]; corrupt: number } {
    const records: SessionRecord[] = [];
    let names: string[];
    try {
      names = readdirSync(this.sessionsDir);
    } catch {
      return { records, corrupt: 0 };
    }
    // The journal first: what it says of a session (ended, or forgotten) wins over a file of it.
    const journal = this.readJournal();
    let corrupt = journal.corrupt;
    const recorded = new Set([...names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -'.json'.length)), ...this.ended.keys()]);
    for (const name of names) {
      const file = join(this.sessionsDir, name);
      const spoolOf = /^([a-z0-9]+)\.log(\.1)?$/.exec(name)?.[1];
      if (spoolOf !== undefined && !recorded.has(spoolOf)) {
        rmSync(file, { force: true }); // the spool of a session forgotten when it could not be deleted
        continue;
      }
      if (name.endsWith('.json.tmp') || name === `${JOURNAL}.tmp`) {
        rmSync(file, { force: true }); // a write the last run did not finish
        continue;
      }
      if (!name.endsWith('.json')) continue;
      const id = name.slice(0, -'.json'.length);
      if (journal.said.has(id)) {
        rmSync(file, { force: true }); // the file it had while it ran: the journal has its end
        continue;
      }
      if (running.has(id)) {
        this.files.add(id);
        continue;
      }
      try {
        const parsed = parseRecord(JSON.parse(readFileSync(file, 'utf8')));
        if ('problem' in parsed) throw new Error(parsed.problem);
        records.push(parsed.record);
        this.files.add(parsed.record.id);
      } catch (err) {
        corrupt++;
        this.log.warn({ file, err: (err as Error).message }, 'skipping a corrupt session record (renamed to .corrupt)');
        try {
          renameSync(file, `${file}.corrupt`);
        } catch {
          // leave it
        }
      }
    }
    records.push(...journal.records.values());
    records.sort((a, b) => a.startedAt - b.startedAt);
    return { records, corrupt };
  }

  /**
   * Read the journal of ended sessions: the newest line of each session it did not forget. A line
   * that is not a record of an ended session (a torn last line, an edit) is copied to
   * `ended.jsonl.corrupt` with a warning and skipped. The journal is then rewritten with the
   * live lines only.
   */
  private readJournal(): { records: Map<string, SessionRecord>; said: Set<string>; corrupt: number } {
    const records = new Map<string, SessionRecord>();
    const said = new Set<string>();
    const file = this.journalPath();
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch {
      return { records, said, corrupt: 0 };
    }
    const bad: string[] = [];
    const lines = text.split('\n');
    // What follows the last newline is a line the last run did not finish, if anything.
    lines.forEach((line, i) => {
      if (line === '') return;
      try {
        const value = JSON.parse(line) as unknown;
        const forget = (value as { forget?: unknown } | null)?.forget;
        if (typeof forget === 'string') {
          said.add(forget);
          records.delete(forget);
          this.ended.delete(forget);
          return;
        }
        const parsed = parseRecord(value);
        if ('problem' in parsed) throw new Error(parsed.problem);
        if (!isEnded(parsed.record)) throw new Error(`the record of a session that has not ended (${parsed.record.status})`);
        said.add(parsed.record.id);
        records.set(parsed.record.id, parsed.record);
        this.ended.set(parsed.record.id, `${line}\n`);
      } catch (err) {
        bad.push(line);
        this.log.warn({ file, line: i + 1, err: (err as Error).message }, `skipping a corrupt line of the journal of ended sessions (kept in ${JOURNAL}.corrupt)`);
      }
    });
    if (bad.length > 0) {
      try {
        appendFileSync(`${file}.corrupt`, bad.map((l) => `${l}\n`).join(''), { mode: 0o600 });
      } catch {
        // the warning named them
      }
    }
    // A last line without its newline would run into the next one appended: rewrite the journal.
    this.journalLines = text.endsWith('\n') ? lines.length - 1 : Number.MAX_SAFE_INTEGER;
    try {
      this.compact(true);
    } catch (err) {
      this.disk.failed('file', err as Error, 'the journal of ended sessions');
      this.log.warn({ file, err: (err as Error).message }, 'cannot compact the journal of ended sessions; it is tried again at the next forget');
    }
    return { records, said, corrupt: bad.length };
  }
}
