import { rmSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';
import { openWork } from '../overlay-work.js';

/** Remove a review's directory (or its work directory), whatever the kernel left in its work directory. */
export function removeReviewDir(dir: string, work = join(dir, 'work')): void {
  openWork(work);
  rmSync(dir, { recursive: true, force: true });
}

/** The same off the event loop. */
export async function removeReviewDirLater(dir: string): Promise<void> {
  openWork(join(dir, 'work'));
  await rm(dir, { recursive: true, force: true });
}
