import { customAlphabet } from 'nanoid';
import { chmodSync, chownSync, mkdir, mkdirSync, mkdtempSync, rmdirSync, rmSync, unlinkSync, writeFile } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';

/** A directory's name: 48 random bits as hex, from nanoid's pool. */
const hex12 = customAlphabet('0123456789abcdef', 12);

/** Directories kept ready, so starting a command creates nothing on disk while it waits. */
const SPARE = 4;

/**
 * Private scratch directories (0700) for sessions: PROCCTL_TMPDIR and the stop file live there.
 * A few are made ahead of need off the main thread; a burst past them makes one on the spot.
 */
export class ScratchDirs {
  private readonly spare: string[] = [];
  private filling = 0;
  private refillTurn: NodeJS.Immediate | undefined;

  /** `ahead`: the name of a file each spare directory gets ahead of need (empty, 0600), when it names one then. */
  constructor(
    private readonly root: string,
    private readonly ahead: () => string | undefined = () => undefined,
  ) {}

  private fresh(): string {
    return join(this.root, hex12());
  }

  /** A new empty directory for one session. */
  take(): string {
    const dir = this.spare.pop() ?? this.makeNow();
    // Made again once this turn is over (the job has started by then): handing work to a thread
    // wakes it, and that is not done on the way to the spawn.
    this.refillTurn ??= setImmediate(() => {
      this.refillTurn = undefined;
      this.refill();
    });
    return dir;
  }

  private makeNow(): string {
    const dir = this.fresh();
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    return dir;
  }

  /** Make the spare directories now (at start-up), off the main thread. */
  refill(): void {
    while (this.spare.length + this.filling < SPARE) {
      this.filling++;
      const dir = this.fresh();
      const file = this.ahead();
      mkdir(dir, { recursive: true, mode: 0o700 }, (err) => {
        if (err || file === undefined) {
          this.filling--;
          if (!err) this.spare.push(dir);
          return;
        }
        // Opened again at the start, made now: a file's creation is the dearer part (~90 µs of a sandboxed start).
        writeFile(join(dir, file), '', { mode: 0o600, flag: 'wx' }, () => {
          this.filling--;
          this.spare.push(dir);
        });
      });
    }
  }

  release(dir: string | undefined): void {
    if (!dir) return;
    // The file made ahead, gone first, leaves most directories empty for the plain rmdir.
    const file = this.ahead();
    try {
      if (file !== undefined) unlinkSync(join(dir, file));
    } catch {
      // Gone, or made something else by the job (the directory is the job's to write): the removal below takes what is there.
    }
    removeDir(dir);
  }
}

/**
 * Remove a directory and what is in it. Most scratch directories are empty or hold only the
 * stop file, so a plain rmdir is tried first: the recursive walk costs ten times as much.
 */
export function removeDir(dir: string): void {
  try {
    rmdirSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') rmSync(dir, { recursive: true, force: true });
  }
}

/** Where sessions that run as sandbox.user keep their scratch directories (made on first use). */
let usersRoot: string | undefined;

/**
 * A scratch directory for a session that runs as another user (sandbox.user), in place of the
 * one it was given: the daemon's own sit under its socket directory (0700, SPEC §2), which that
 * user cannot enter. This one is the user's (0700) under a root-owned directory it may pass
 * through but not list (0711), in the system's temporary directory; removed when the session
 * is cleared, and all of them when the daemon exits.
 */
export function scratchFor(user: { uid: number; gid: number }, given: string): string {
  if (usersRoot === undefined) {
    usersRoot = mkdtempSync(join(tmpdir(), 'procctl-users-'));
    chmodSync(usersRoot, 0o711);
    const root = usersRoot;
    process.once('exit', () => rmSync(root, { recursive: true, force: true }));
  }
  const dir = join(usersRoot, basename(given));
  mkdirSync(dir, { mode: 0o700 });
  chownSync(dir, user.uid, user.gid);
  rmSync(given, { recursive: true, force: true });
  return dir;
}
