import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, platform } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
// @ts-expect-error: node-gyp-build ships no type declarations; its one call is typed where it is made.
import nodeGypBuild from 'node-gyp-build';

const HERE = dirname(fileURLToPath(import.meta.url)); // import.meta.dirname needs Node 20.11
const require = createRequire(import.meta.url);

/** The package's own directory: up from src/, dist/src/ or the CLI bundle in dist/src/cli/. */
export const PACKAGE_ROOT =
  [1, 2, 3]
    .map((up) => resolve(HERE, ...Array<string>(up).fill('..')))
    .find((dir) => {
      try {
        return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name === 'procctl';
      } catch {
        return false;
      }
    }) ?? resolve(HERE, '..', '..');

/** Where the addon is looked for, first that exists: a local build, then the package's prebuild. */
export const ADDON_PLACES = `build/Release/procctl.node or prebuilds/${platform()}-${arch()}/`;

/** How to build the addon where no prebuild fits; scripts/build-addon.mjs says the same. */
export const ADDON_FIX =
  'to build it, install python3, make and a C compiler (Debian: apt-get install -y python3 make g++), ' +
  `run \`node scripts/build-addon.mjs\` in ${PACKAGE_ROOT} and restart the daemon ` +
  '(or install again letting npm run its install script, which builds it: `npm install -g --allow-scripts=procctl PACKAGE`)';

let loaded: { file: string; exports: Record<string, unknown> } | Error | undefined;

/** The addon file node-gyp-build picks, relative to the package, or an Error saying none is there. */
function addonFile(): string | Error {
  try {
    return (nodeGypBuild as { resolve(dir: string): string }).resolve(PACKAGE_ROOT);
  } catch {
    return new Error(`the native addon is not built (no ${ADDON_PLACES})`);
  }
}

/**
 * The project's addon (native/*.c, one module): a local build (build/Release, made at install
 * by scripts/build-addon.mjs or in a checkout) before the prebuild the package ships
 * (prebuilds/<platform>-<arch>/, made at pack time by scripts/prebuild-addon.mjs), found by
 * node-gyp-build. Returns the functions named, or an Error saying why they cannot be used: not
 * built, not loadable here (another libc, a broken file), or a build older than a function.
 */
export function loadAddon<T>(names: readonly string[]): T | Error {
  if (loaded === undefined) {
    const file = addonFile();
    if (file instanceof Error) loaded = file;
    else {
      const rel = relative(PACKAGE_ROOT, file);
      try {
        loaded = existsSync(file) ? { file: rel, exports: require(file) as Record<string, unknown> } : new Error(`${rel} is missing`);
      } catch (err) {
        loaded = new Error(`${rel} cannot be loaded (${(err as Error).message.split('\n')[0]})`);
      }
    }
  }
  if (loaded instanceof Error) return loaded;
  const exports = loaded.exports;
  const missing = names.filter((n) => typeof exports[n] !== 'function');
  if (missing.length > 0) return new Error(`${loaded.file} is an older build without ${missing.join(', ')}`);
  return exports as T;
}
