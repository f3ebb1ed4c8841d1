import { readFileSync } from 'node:fs';
import { gzipSync } from 'node:zlib';
import { fileURLToPath } from 'node:url';

/** The page, built by scripts/bundle-web.mjs into dist/web (this file runs from dist/src/console). */
export const WEB_DIR = fileURLToPath(new URL('../../web/', import.meta.url));

const TYPES: Record<string, string> = {
  'index.html': 'text/html; charset=utf-8',
  'app.js': 'text/javascript; charset=utf-8',
  'app.css': 'text/css; charset=utf-8',
};

export interface Asset {
  type: string;
  body: Buffer;
  gzip: Buffer;
}

/**
 * The page's files, read and compressed once at start (a handful of files, well under a
 * megabyte). A missing build is said at start, naming the fix, rather than at the first request.
 */
export function loadAssets(dir = WEB_DIR): Map<string, Asset> {
  const assets = new Map<string, Asset>();
  for (const [name, type] of Object.entries(TYPES)) {
    let body: Buffer;
    try {
      body = readFileSync(`${dir}${name}`);
    } catch {
      throw new Error(`the console's page is not built (${dir}${name} is missing): run npm run build in the procctl checkout`);
    }
    assets.set(name, { type, body, gzip: gzipSync(body, { level: 9 }) });
  }
  return assets;
}
