import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { basename, join } from 'node:path';

/** The file system a path is on, as a figure's caption names it: type, and for ext4 whether it journals. */
export function describeFs(path: string): { type: string; journal?: boolean; text: string } {
  let type = 'unknown';
  let source = '';
  try {
    [type, source] = execFileSync('findmnt', ['-no', 'FSTYPE,SOURCE', '-T', path], { encoding: 'utf8' }).trim().split(/\s+/);
  } catch {
    return { type, text: 'a file system findmnt could not name' };
  }
  if (type !== 'ext4') return { type, text: type };
  // jbd2 lists each journal it keeps as <device>-8.
  const journal = existsSync(join('/proc/fs/jbd2', `${basename(source)}-8`));
  return { type, journal, text: journal ? 'ext4 with its journal' : 'ext4 without a journal' };
}

/**
 * Run `fn` with a directory on a fresh ext4 that journals, made in a 2 GiB image file and
 * mounted through a loop device; removed after. Undefined with the reason where that cannot be
 * done (not root, no loop devices, no mkfs.ext4).
 */
export async function onJournaledExt4<T>(under: string, fn: (dir: string) => Promise<T>): Promise<T | { skipped: string }> {
  if (process.getuid?.() !== 0) return { skipped: 'a loop mount needs root' };
  const base = mkdtempSync(join(under, 'procctl-bench-ext4-'));
  const image = join(base, 'fs.img');
  const mnt = join(base, 'mnt');
  mkdirSync(mnt);
  let mounted = false;
  try {
    try {
      execFileSync('truncate', ['-s', '2G', image]);
      execFileSync('mkfs.ext4', ['-q', '-F', image], { stdio: 'ignore' });
      execFileSync('mount', ['-o', 'loop', image, mnt], { stdio: 'pipe' });
      mounted = true;
    } catch (err) {
      return { skipped: `could not make and mount an ext4 image: ${(err as Error).message.split('\n')[0]}` };
    }
    return await fn(mnt);
  } finally {
    if (mounted) execFileSync('umount', [mnt]);
    rmSync(base, { recursive: true, force: true });
  }
}
