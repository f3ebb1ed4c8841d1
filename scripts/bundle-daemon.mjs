#!/usr/bin/env node
// The one-file daemon: bundles the compiled daemon (dist/src/daemon/main.js and everything it
// imports from dist/src, with zod, commander, diff, nanoid, re2js and node-forge) into
// dist/src/daemon/procctld.cjs with a V8 code cache beside it (procctld.cjs.cache), as
// scripts/bundle-cli.mjs does for the CLI: most of what the daemon's start cost over `node -e 0`
// was finding, reading and compiling some 300 ES modules, and a planned restart (SPEC §19) pays it
// while no request is answered. bin/procctld runs it when every file it was made from is as it
// was (procctld.cjs.json names each with its size and hash), else the compiled sources.
// `npm run build` runs this after tsc. docs/benchmarks.md ("A planned restart answered again
// within a second") has the figures.
//
// Outside the bundle, required from node_modules when used: what loads files by its own path
// (pino's workers, web-tree-sitter's WebAssembly, node-pty's and the addon's native code), and
// what is loaded only when configured (prom-client, OpenTelemetry: daemon.status.telemetry says
// whether the SDK is loaded by looking for it in require's cache).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, rmSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { bundleOptions, replace, ROOT } from './bundle-support.mjs';

const DAEMON = join(ROOT, 'dist', 'src', 'daemon');
const ENTRY = join(DAEMON, 'main.js');
export const BUNDLE = join(DAEMON, 'procctld.cjs');
export const STAMP = join(DAEMON, 'procctld.cjs.json');
/** The packages inside the bundle: plain JavaScript that loads nothing by its own path. */
const INSIDE = new Set(['zod', 'commander', 'diff', 'nanoid', 're2js', 'node-forge']);

/** Every package but those INSIDE stays outside, required at run time. */
const outsidePackages = {
  name: 'outside-packages',
  setup(b) {
    b.onResolve({ filter: /^[^./]/ }, (args) => {
      if (args.path.startsWith('node:')) return { path: args.path, external: true };
      const name = args.path.startsWith('@') ? args.path.split('/').slice(0, 2).join('/') : args.path.split('/')[0];
      return INSIDE.has(name) ? undefined : { path: args.path, external: true };
    });
  },
};

/**
 * `import.meta.url` in each compiled module means that module's own file (dist/src/...), which
 * is still there: a worker or a helper started from it (audit/thread.js, guardian.js,
 * inside-net.js), a require() relative to it, the package's root found from it.
 */
const ownUrl = {
  name: 'own-url',
  setup(b) {
    b.onLoad({ filter: /[/\\]dist[/\\]src[/\\].*\.js$/ }, (args) => {
      const text = readFileSync(args.path, 'utf8');
      if (!text.includes('import.meta')) return undefined;
      const url = JSON.stringify(pathToFileURL(args.path).href);
      const rel = JSON.stringify(relative(DAEMON, args.path));
      const rewritten = text
        .replaceAll('import.meta.url', `__procctlUrlOf(${rel})`)
        .replaceAll('import.meta.dirname', `require('node:path').dirname(require('node:url').fileURLToPath(__procctlUrlOf(${rel})))`);
      if (rewritten.includes('import.meta')) throw new Error(`bundle-daemon: ${args.path} uses import.meta in a way this script does not rewrite (${url})`);
      return { contents: rewritten, loader: 'js' };
    });
  },
};

/**
 * The stamp bin/procctld checks before it runs the bundle: each compiled file the bundle was made
 * from, with its size, its modification time and the sha256 of its contents. A file whose size
 * differs makes the bundle stale; one whose time differs (a tarball's install sets the times as
 * it unpacks) is hashed, and must hash the same. A file changed since (a rebuild, or a test
 * writing another format into one module) runs the compiled sources instead.
 */
function writeStamp(inputs) {
  const files = inputs
    .filter((f) => f.startsWith('dist/'))
    .sort()
    .map((f) => {
      const path = join(ROOT, f);
      const st = statSync(path);
      return [relative(DAEMON, path), st.size, st.mtimeMs, createHash('sha256').update(readFileSync(path)).digest('hex')];
    });
  replace(STAMP, `${JSON.stringify({ files })}\n`);
  return files.length;
}

/**
 * The code cache: the bundle run once as `procctld --version`, which loads (evaluates) every
 * module of the daemon and exits; bin/procctld writes what that compiled into procctld.cjs.cache
 * as it exits. Nothing is started, so it works on a host where the daemon could not run.
 */
function writeCodeCache() {
  const env = { ...process.env, PROCCTL_WRITE_CODE_CACHE: '1' };
  delete env.PROCCTL_DAEMON_SOURCES;
  delete env.PROCCTL_HANDOVER;
  const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'procctld'), '--version'], { env, stdio: ['ignore', 'ignore', 'inherit'], timeout: 60_000 });
  // Without it the bundle still runs, compiling as it goes.
  if (r.status !== 0) process.stderr.write(`bundle-daemon: \`procctld --version\` from the bundle exited ${r.status ?? r.signal}; the bundle ships without a code cache\n`);
  return r.status === 0 && existsSync(`${BUNDLE}.cache`);
}

const result = await build({
  ...bundleOptions(ENTRY, BUNDLE),
  plugins: [outsidePackages, ownUrl],
  // Smaller to read and hash, names kept (stack traces and logs read as the sources).
  minifyWhitespace: true,
  minifySyntax: true,
  banner: { js: "const __procctlUrlOf = (rel) => require('node:url').pathToFileURL(require('node:path').join(__dirname, rel)).href;" },
});

const inside = Object.keys(result.metafile.inputs);
rmSync(`${BUNDLE}.cache`, { force: true });
rmSync(STAMP, { force: true });
replace(BUNDLE, result.outputFiles[0].text);
const stamped = writeStamp(inside);
const cached = writeCodeCache();
process.stdout.write(`bundled ${inside.length} modules (${stamped} of dist/) into ${relative(ROOT, BUNDLE)} (${Math.round(result.outputFiles[0].text.length / 1024)} KiB) ${cached ? 'with' : 'without'} its code cache\n`);
