import { closeSync } from 'node:fs';

/** Close a descriptor that may be closed already (by its owner, or a failed hand-over): nothing else can go wrong. */
export function closeQuietly(fd: number): void {
  try {
    closeSync(fd);
  } catch {
    // closed already
  }
}
