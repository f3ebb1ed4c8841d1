import { rmSync } from 'node:fs';
import { rm, rmdir, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { openWork } from '../base/overlay-work.js';

/** Remove a review's directory, whatever the kernel left in its work directory. */
export function removeReviewDir(dir: string): void {
  openWork(join(dir, 'work'));
  rmSync(dir, { recursive: true, force: true });
}

/** Remove an overlay's work directory, opening first what the kernel left in it mode 000. */
export function removeWork(work: string): void {
  openWork(work);
  rmSync(work, { recursive: true, force: true });
}

/**
 * Empty an overlay's work directory of what the kernel left there (`work/` and, for a volatile
 * mount, `work/incompat/volatile/dirty`), so it can serve another mount: by their exact names,
 * deepest first, on libuv's threads. Rejects on anything else found there (then the directory is
 * removed instead).
 */
export async function clearWorkLater(work: string): Promise<void> {
  openWork(work);
  try {
    await unlink(join(work, 'work', 'incompat', 'volatile', 'dirty'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  for (const d of ['work/incompat/volatile', 'work/incompat', 'work']) {
    try {
      await rmdir(join(work, d));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
  }
}

/** The same off the event loop. */
export async function removeReviewDirLater(dir: string): Promise<void> {
  openWork(join(dir, 'work'));
  await rm(dir, { recursive: true, force: true });
}
