import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { rename, rm, writeFile } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { readStat } from '../runner/procfs.js';
import { isSnapshot, type SessionSnapshot } from '../session/persist.js';

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
 */
export class StateStore {
  readonly sessionsDir: string;

  constructor(
    readonly dir: string,
    private readonly log: Logger,
  ) {
    this.sessionsDir = join(dir, 'sessions');
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

  save(snap: SessionSnapshot): void {
    const file = this.recordPath(snap.id);
    const tmp = `${file}.tmp`;
    try {
      writeFileSync(tmp, JSON.stringify(snap), { mode: 0o600 });
      renameSync(tmp, file);
    } catch (err) {
      this.log.error({ err: (err as Error).message, sessionId: snap.id }, 'cannot write the session record');
    }
  }

  /**
   * Write a record off the main thread (a finished session's: nothing waits for it). Writes of
   * one session stay in order, and a session removed meanwhile is not written back.
   */
  saveLater(snap: SessionSnapshot): void {
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
      } catch (err) {
        this.log.error({ err: (err as Error).message, sessionId: id }, 'cannot write the session record');
      }
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

  remove(id: string): void {
    if (this.pending.has(id)) this.removed.add(id);
    for (const f of [this.recordPath(id), this.spoolPath(id), `${this.spoolPath(id)}.1`]) rmSync(f, { force: true });
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
  loadAll(): { snapshots: SessionSnapshot[]; corrupt: number } {
    const snapshots: SessionSnapshot[] = [];
    let corrupt = 0;
    let names: string[];
    try {
      names = readdirSync(this.sessionsDir);
    } catch {
      return { snapshots, corrupt };
    }
    for (const name of names) {
      const file = join(this.sessionsDir, name);
      if (name.endsWith('.json.tmp')) {
        rmSync(file, { force: true }); // a write the last run did not finish
        continue;
      }
      if (!name.endsWith('.json')) continue;
      try {
        const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
        if (!isSnapshot(parsed)) throw new Error('not a session record');
        snapshots.push(parsed);
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
    snapshots.sort((a, b) => a.startedAt - b.startedAt);
    return { snapshots, corrupt };
  }
}
