import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './daemon.js';

/** A C helper of the benches, built: its binary and the directory to remove once done. */
export interface NativeHelper {
  bin: string;
  dir: string;
}

/**
 * Build bench/native/NAME.c now with the system's C compiler (`$CC`, else `cc`), into a directory
 * of its own. Resolves to why not (a string) when there is no compiler or the build fails.
 */
export function buildNative(name: string): NativeHelper | string {
  const dir = mkdtempSync(join(tmpdir(), `procctl-bench-${name}-`));
  const bin = join(dir, name);
  const cc = process.env.CC || 'cc';
  try {
    execFileSync(cc, ['-O2', '-o', bin, join(ROOT, 'bench', 'native', `${name}.c`)], { stdio: ['ignore', 'ignore', 'pipe'] });
    return { bin, dir };
  } catch (err) {
    rmSync(dir, { recursive: true, force: true });
    const e = err as NodeJS.ErrnoException & { stderr?: Buffer };
    return e.code === 'ENOENT' ? `no C compiler (${cc}) on this machine` : `${cc} could not build bench/native/${name}.c: ${e.stderr?.toString().trim() || e.message}`;
  }
}
