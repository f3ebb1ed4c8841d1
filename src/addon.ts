import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const HERE = dirname(fileURLToPath(import.meta.url)); // import.meta.dirname needs Node 20.11
/** Where the project root may be: up from src/, dist/src/ or the CLI bundle in dist/src/cli/. */
const ROOTS = [1, 2, 3].map((up) => resolve(HERE, ...Array<string>(up).fill('..')));

/**
 * One of the project's own addons (build/Release/NAME.node, built at install by
 * scripts/build-addon.mjs), or an Error saying why it cannot be used.
 */
export function loadBuilt<T>(name: string): T | Error {
  const rel = join('build', 'Release', `${name}.node`);
  const file = ROOTS.map((root) => join(root, rel)).find((f) => existsSync(f));
  if (!file) return new Error(`${rel} is not built`);
  try {
    return createRequire(import.meta.url)(file) as T;
  } catch (err) {
    return new Error(`${rel} cannot be loaded (${(err as Error).message.split('\n')[0]})`);
  }
}
