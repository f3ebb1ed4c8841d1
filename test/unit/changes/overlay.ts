import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadAddon } from '../../../src/base/addon.js';

/**
 * Real overlay mounts for the tests: the kernel writes the upper directory, as it will for a
 * review session. Each mount lives in a private mount namespace of one `unshare` process that
 * runs the job's commands and exits, so no mount outlives it; a run that hangs is killed by PID.
 */
export interface Layers {
  base: string;
  /** The real workspace (lowerdir). */
  lower: string;
  upper: string;
  work: string;
  merged: string;
  originals: string;
}

export function layers(): Layers {
  const base = mkdtempSync(join(tmpdir(), 'procctl-changes-'));
  const l = { base, lower: join(base, 'lower'), upper: join(base, 'upper'), work: join(base, 'work'), merged: join(base, 'merged'), originals: join(base, 'originals') };
  for (const d of [l.lower, l.upper, l.work, l.merged]) mkdirSync(d);
  return l;
}

export const cleanup = (l: Layers) => rmSync(l.base, { recursive: true, force: true });

export type Format = 'trusted' | 'user';

/**
 * Run `script` (sh) in the merged directory of an overlay over `l`: as real root (marks in
 * trusted.overlay.*) or in a user namespace with `userxattr` (user.overlay.*). Throws with the
 * output when the mount or the script fails.
 */
export function inOverlay(l: Layers, script: string, format: Format = 'trusted'): void {
  const opts = `${format === 'user' ? 'userxattr,' : ''}lowerdir=${l.lower},upperdir=${l.upper},workdir=${l.work}`;
  const unshare = format === 'user' ? ['-Urm'] : ['-m'];
  const r = spawnSync('unshare', [...unshare, 'sh', '-ec', `mount -t overlay overlay -o ${opts} ${l.merged}; cd ${l.merged}; ${script}`], {
    encoding: 'utf8',
    timeout: 20_000,
    killSignal: 'SIGKILL',
  });
  if (r.status !== 0) throw new Error(`overlay run failed (${r.status ?? r.signal}): ${r.stderr || r.error?.message}`);
}

const probed = new Map<Format, string | undefined>();

/** Why an overlay of this format cannot be mounted here, or undefined when it can (tried once). */
export function cannotMount(format: Format): string | undefined {
  if (!probed.has(format)) {
    const l = layers();
    try {
      inOverlay(l, 'true', format);
      probed.set(format, undefined);
    } catch (err) {
      probed.set(format, `no ${format === 'user' ? 'user-namespace ' : ''}overlay mount here: ${(err as Error).message.trim()}`);
    } finally {
      cleanup(l);
    }
  }
  return probed.get(format);
}

/**
 * Write an extended attribute on a path (not following a final symlink), as a kernel's overlay
 * would write its marks: through the project's addon, so no attr(1) is needed on the machine.
 */
export function setXattr(path: string, name: string, value: string): void {
  const addon = loadAddon<{ setxattr(path: string, name: string, value: Buffer): void }>(['setxattr']);
  if (addon instanceof Error) throw new Error(`cannot write an extended attribute: ${addon.message}; node scripts/build-addon.mjs builds it`);
  addon.setxattr(path, name, Buffer.from(value));
}
