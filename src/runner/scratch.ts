import { randomBytes } from 'node:crypto';
import { mkdirSync, rmSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';

/** Directories kept ready, so starting a command creates nothing on disk while it waits. */
const SPARE = 4;

/**
 * Private scratch directories (0700) for sessions: PROCCTL_TMPDIR and the stop file live there.
 * A few are made ahead of need off the main thread; a burst past them makes one on the spot.
 */
export class ScratchDirs {
  private readonly spare: string[] = [];
  private filling = 0;

  constructor(private readonly root: string) {}

  private fresh(): string {
    return join(this.root, randomBytes(6).toString('hex'));
  }

  /** A new empty directory for one session. */
  take(): string {
    const dir = this.spare.pop() ?? this.makeNow();
    this.refill();
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
      mkdir(dir, { recursive: true, mode: 0o700 }).then(
        () => {
          this.filling--;
          this.spare.push(dir);
        },
        () => this.filling--,
      );
    }
  }

  release(dir: string | undefined): void {
    if (dir) rmSync(dir, { recursive: true, force: true });
  }
}
