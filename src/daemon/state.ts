import { chmodSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { isSnapshot, type SessionSnapshot } from '../session/persist.js';

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

  init(): void {
    mkdirSync(this.sessionsDir, { recursive: true, mode: 0o700 });
    chmodSync(this.dir, 0o700);
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

  remove(id: string): void {
    for (const f of [this.recordPath(id), this.spoolPath(id), `${this.spoolPath(id)}.1`]) rmSync(f, { force: true });
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
