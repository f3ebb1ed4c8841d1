import { rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { openWork } from '../overlay-work.js';

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

/** The same off the event loop. */
export async function removeReviewDirLater(dir: string): Promise<void> {
  openWork(join(dir, 'work'));
  await rm(dir, { recursive: true, force: true });
}
