import { chmodSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The directories the kernel makes in an overlay's work directory, mode 000: `work/`, and for a
 * `volatile` mount `work/incompat/volatile`. Root removes them as they are; a daemon that is not
 * root owns them but cannot list them, so they are opened to it first (parents before children).
 * Nothing of the job is in the work directory: it is the kernel's, outside what the job sees.
 * Used by the review probe (sandbox/overlay.ts) and by the removal of reviews (changes/work.ts).
 */
const KERNEL_DIRS = ['work', 'work/incompat', 'work/incompat/volatile'];

export function openWork(work: string): void {
  // Root lists and removes them as they are.
  if (process.getuid?.() === 0) return;
  for (const d of KERNEL_DIRS) {
    try {
      chmodSync(join(work, d), 0o700);
    } catch {
      // not there (not volatile, or already gone)
    }
  }
}
