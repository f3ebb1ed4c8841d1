import { cpSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './daemon.js';

const copies: string[] = [];

/**
 * A copy of the built package (its bin, dist, addon build and package.json; node_modules linked):
 * another installed build of procctld. `version` rewrites the version its package.json says.
 * cpSync gives every file a new time, so a bundle's stamp is decided by its hashes.
 */
export function packageCopy(version?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-pkg-'));
  copies.push(dir);
  for (const part of ['bin', 'dist', 'build', 'package.json']) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  if (version !== undefined) setVersion(dir, version);
  return dir;
}

/** Say `version` in a package copy's package.json (an upgrade to another build). */
export function setVersion(dir: string, version: string): void {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ ...pkg, version }));
}

/** Remove every copy made. */
export function removePackageCopies(): void {
  for (const dir of copies.splice(0)) rmSync(dir, { recursive: true, force: true });
}
