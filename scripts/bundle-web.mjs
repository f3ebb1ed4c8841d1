#!/usr/bin/env node
// The console's page (web/, SPEC §17): bundled into dist/web at build time (app.js, app.css,
// index.html), so `procctl ui` works offline and the page fetches nothing from elsewhere.
// `npm run build` runs this after tsc. It fails when the script and style together weigh more than
// the budget, gzipped, so the page stays small as it grows.
import { copyFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { build } from 'esbuild';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'dist', 'web');
/** The budget for script and style, gzipped (issue 28: ≤ 300 KB). */
const BUDGET = 300 * 1024;

mkdirSync(OUT, { recursive: true });
await build({
  entryPoints: { app: join(ROOT, 'web', 'main.tsx') },
  absWorkingDir: ROOT,
  bundle: true,
  outdir: OUT,
  format: 'esm',
  target: 'es2022',
  platform: 'browser',
  jsx: 'automatic',
  jsxImportSource: 'preact',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
});
copyFileSync(join(ROOT, 'web', 'index.html'), join(OUT, 'index.html'));
const weight = ['app.js', 'app.css'].reduce((n, f) => n + gzipSync(readFileSync(join(OUT, f)), { level: 9 }).length, 0);
if (weight > BUDGET) {
  process.stderr.write(`bundle-web: the page weighs ${Math.round(weight / 1024)} KiB gzipped, over its ${BUDGET / 1024} KiB budget\n`);
  process.exit(1);
}
process.stdout.write(`bundled the console's page into dist/web (${Math.round(weight / 1024)} KiB gzipped)\n`);
