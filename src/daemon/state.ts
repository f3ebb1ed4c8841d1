import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { readStat } from '../runner/procfs.js';
import { unavailable } from '../errors.js';
import { DiskHealth, type DiskState } from '../session/disk.js';
import { parseRecord, type SessionRecord } from '../session/persist.js';

/** While records wait to be written (the directory refused them), they are tried again this often. */
const RETRY_MS = 2000;

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
    const lock = join(this.dir, 'daemon.json');
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

  save(snap: SessionRecord): void {
    const file = this.recordPath(snap.id);
    const tmp = `${file}.tmp`;
    try {
      writeFileSync(tmp, JSON.stringify(snap), { mode: 0o600 });
      renameSync(tmp, file);
    } catch (err) {
      return this.refused(snap, err as Error);
    }
    this.unsaved.delete(snap.id);
    this.disk.succeeded();
  }

  /** A record the directory did not take: it waits (the newest of its session) and is tried again. */
  private refused(snap: SessionRecord, err: Error): void {
    this.unsaved.set(snap.id, snap);
    this.disk.failed(err, `the record of session ${snap.id}`);
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
   * Write a record off the main thread (a finished session's: nothing waits for it). Writes of
   * one session stay in order, and a session removed meanwhile is not written back.
   */
  saveLater(snap: SessionRecord): void {
    const id = snap.id;
    const body = JSON.stringify(snap);
    const file = this.recordPath(id);
    const previous = this.pending.get(id) ?? Promise.resolve();
    const next = previous.then(async () => {
      if (this.removed.has(id)) return;
      const tmp = `${file}.tmp`;
      try {
        await writeFile(tmp, body, { mode: 0o600 });
        if (this.removed.has(id)) await rm(tmp, { force: true });
        else await rename(tmp, file);
        // Forgotten while the rename was under way: it must not come back at the next start.
        if (this.removed.has(id)) await rm(file, { force: true });
      } catch (err) {
        if (!this.removed.has(id)) this.refused(snap, err as Error);
        return;
      }
      this.unsaved.delete(id);
      this.disk.succeeded();
    });
    this.pending.set(id, next);
    void next.then(() => {
      if (this.pending.get(id) !== next) return;
      this.pending.delete(id);
      this.removed.delete(id);
    });
  }

  /** Resolves once every record written off the main thread is on disk. */
  async flush(): Promise<void> {
    await Promise.all(this.pending.values());
  }

  private readonly pending = new Map<string, Promise<void>>();
  private readonly removed = new Set<string>();

  /**
   * Delete a session's record and spool, all or nothing: the record goes first, and if it cannot
   * be deleted nothing is (`unavailable`), so a restart never brings back a session reported gone.
   */
  remove(id: string): void {
    const record = this.recordPath(id);
    try {
      unlinkSync(record);
    } catch (err) {
      const e = err as NodeJS.ErrnoException;
      if (e.code !== 'ENOENT') {
        this.disk.failed(e, `the record of session ${id}`);
        throw unavailable(
          `session ${id} was not forgotten: its record ${record} cannot be deleted (${e.message}); it stays listed. Make ${this.sessionsDir} writable and try again`,
          { sessionId: id, stateDir: this.dir },
        );
      }
    }
    this.unsaved.delete(id);
    if (this.pending.has(id)) this.removed.add(id);
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
    const file = this.recordPath(id);
    this.log.warn({ file, err: why }, 'skipping a corrupt session record (renamed to .corrupt)');
    try {
      renameSync(file, `${file}.corrupt`);
    } catch {
      // leave it
    }
  }

  /** Every readable record; corrupt ones are renamed `*.corrupt` and counted. */
  loadAll(): { records: SessionRecord[]; corrupt: number } {
    const records: SessionRecord[] = [];
    let corrupt = 0;
    let names: string[];
    try {
      names = readdirSync(this.sessionsDir);
    } catch {
      return { records, corrupt };
    }
    const recorded = new Set(names.filter((n) => n.endsWith('.json')).map((n) => n.slice(0, -'.json'.length)));
    for (const name of names) {
      const file = join(this.sessionsDir, name);
      const spoolOf = /^([a-z0-9]+)\.log(\.1)?$/.exec(name)?.[1];
      if (spoolOf !== undefined && !recorded.has(spoolOf)) {
        rmSync(file, { force: true }); // the spool of a session forgotten when it could not be deleted
        continue;
      }
      if (name.endsWith('.json.tmp')) {
        rmSync(file, { force: true }); // a write the last run did not finish
        continue;
      }
      if (!name.endsWith('.json')) continue;
      try {
        const parsed = parseRecord(JSON.parse(readFileSync(file, 'utf8')));
        if ('problem' in parsed) throw new Error(parsed.problem);
        records.push(parsed.record);
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
    records.sort((a, b) => a.startedAt - b.startedAt);
    return { records, corrupt };
  }
}
