import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { arch, constants as os, platform } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url)); // import.meta.dirname needs Node 20.11
const require = createRequire(import.meta.url);

let root: string | undefined;

/** The package's own directory: up from src/, dist/src/ or the CLI bundle in dist/src/cli/ (found when first asked: every CLI command loads this file). */
export function packageRoot(): string {
  root ??=
    [1, 2, 3]
      .map((up) => resolve(HERE, ...Array<string>(up).fill('..')))
      .find((dir) => {
        try {
          return JSON.parse(readFileSync(join(dir, 'package.json'), 'utf8')).name === 'procctl';
        } catch {
          return false;
        }
      }) ?? resolve(HERE, '..', '..');
  return root;
}

/** Where the addon is looked for, first that exists: a local build, then the package's prebuild. */
export const ADDON_PLACES = `build/Release/procctl.node or prebuilds/${platform()}-${arch()}/`;

/** How to build the addon where no prebuild fits; scripts/build-addon.mjs says the same. */
export function addonFix(): string {
  return (
    'to build it, install python3, make and a C compiler (Debian: apt-get install -y python3 make g++), ' +
    `run \`node scripts/build-addon.mjs\` in ${packageRoot()} and restart the daemon ` +
    '(or install again letting npm run its install script, which builds it: `npm install -g --allow-scripts=procctl PACKAGE`)'
  );
}

/** The prebuild's name (scripts/prebuild-addon.mjs): N-API, glibc. */
const PREBUILD = 'procctl.napi.glibc.node';

let loaded: { file: string; exports: Record<string, unknown> } | Error | undefined;

/**
 * The file node-gyp-build would pick, tried where it is known without asking node-gyp-build:
 * every CLI command loads the addon (the peer check), and node-gyp-build's search (its module,
 * package.json, a directory listing, its tag parsing) was most of that cost.
 */
function knownAddon(): { file: string; exports: Record<string, unknown> } | undefined {
  const pkg = packageRoot();
  const places = [];
  // node-gyp-build's own order and switches: build/Release unless PREBUILDS_ONLY, a glibc prebuild unless LIBC or Alpine say otherwise.
  if (!process.env.PREBUILDS_ONLY) places.push(join(pkg, 'build', 'Release', 'procctl.node'));
  if (!process.env.LIBC && !existsSync('/etc/alpine-release')) places.push(join(pkg, 'prebuilds', `${platform()}-${arch()}`, PREBUILD));
  for (const file of places) {
    if (!existsSync(file)) continue;
    try {
      return { file: relative(pkg, file), exports: require(file) as Record<string, unknown> };
    } catch {
      // not loadable here: node-gyp-build decides, and says why
      return undefined;
    }
  }
  return undefined;
}

/** The addon file node-gyp-build picks, relative to the package, or an Error saying none is there. */
function addonFile(): string | Error {
  try {
    // Loaded only when the known places fail, so a command's start-up reads nothing from node_modules.
    return (require('node-gyp-build') as { resolve(dir: string): string }).resolve(packageRoot());
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
  if (loaded === undefined) loaded = knownAddon();
  if (loaded === undefined) {
    const file = addonFile();
    if (file instanceof Error) loaded = file;
    else {
      const rel = relative(packageRoot(), file);
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

/**
 * Why the addon loaded is older than the native sources beside it (a checkout whose native/ moved
 * on after `node scripts/build-addon.mjs` ran), or undefined when it matches, is not loaded, or
 * there are no sources to compare with. Such a build loads and runs as if current, and fails in
 * ways that name the symptom (a descriptor missing in a hand-over), not the cause.
 */
export function addonStale(): string | undefined {
  if (loaded === undefined || loaded instanceof Error) return undefined;
  const script = join(packageRoot(), 'native', 'source-hash.cjs');
  if (!existsSync(script)) return undefined;
  let sources: string;
  try {
    sources = (require(script) as { sourceHash(): string }).sourceHash();
  } catch {
    return undefined;
  }
  const built = loaded.exports.sourceHash;
  if (built === sources) return undefined;
  const from = typeof built === 'string' ? `sources ${built}` : 'sources older than the hash it carries';
  return `${loaded.file} was built from ${from}, but native/ now holds ${sources}: run \`node scripts/build-addon.mjs\` in ${packageRoot()} and restart the daemon`;
}

/** An errno's name (EINVAL) from its number, as the addon's errors and answers carry it. */
export function errnoName(code: number): string {
  return Object.entries(os.errno).find(([, v]) => v === code)?.[0] ?? `errno ${code}`;
}
