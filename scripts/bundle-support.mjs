// What scripts/bundle-cli.mjs and scripts/bundle-daemon.mjs share: where the package is, how a
// file is put in place, and the esbuild options both bundles are made with.
import { renameSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Write a file aside and rename it into place, so a process starting meanwhile never reads half of it. */
export function replace(file, contents) {
  const tmp = `${file}.${process.pid}.tmp`;
  writeFileSync(tmp, contents);
  renameSync(tmp, file);
}

/**
 * One CommonJS file for Node 20 from a compiled entry, kept in memory (written by the caller)
 * with the list of its inputs: CommonJS so that bin/procctl and bin/procctld can compile it with
 * a V8 code cache (node:vm), which ES modules lack.
 */
export function bundleOptions(entry, outfile) {
  return {
    entryPoints: [entry],
    absWorkingDir: ROOT,
    bundle: true,
    write: false,
    metafile: true,
    platform: 'node',
    format: 'cjs',
    target: 'node20',
    outfile,
    legalComments: 'none',
    logLevel: 'warning',
  };
}
