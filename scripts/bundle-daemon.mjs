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
async function writeCodeCache() {
  const env = { ...process.env, PROCCTL_WRITE_CODE_CACHE: '1' };
  delete env.PROCCTL_DAEMON_SOURCES;
  delete env.PROCCTL_HANDOVER;
  // With the daemon's node flags (src/base/node-flags.ts): V8 takes a code cache only from a run with the same flags.
  const { DAEMON_NODE_FLAGS } = await import(pathToFileURL(join(ROOT, 'dist', 'src', 'base', 'node-flags.js')).href);
  const r = spawnSync(process.execPath, [...DAEMON_NODE_FLAGS, join(ROOT, 'bin', 'procctld'), '--version'], { env, stdio: ['ignore', 'ignore', 'inherit'], timeout: 60_000 });
  // Without it the bundle still runs, compiling as it goes.
  if (r.status !== 0) process.stderr.write(`bundle-daemon: \`procctld --version\` from the bundle exited ${r.status ?? r.signal}; the bundle ships without a code cache\n`);
  return r.status === 0 && existsSync(`${BUNDLE}.cache`);
}

/**
 * Node's modules the daemon needs only once a request or a config asks for them (the readiness
 * probes' HTTP, the network proxy's HTTP, HTTP/2 and TLS, its DNS lookups, the console's and the
 * metrics' servers): in the bundle each is bound to a stand-in that requires it at the first use
 * of one of its names, so none is loaded, and none of its objects made, before the first request
 * is answered (loading these five took about 30-45 ms and 1.6 MB of fresh memory at every start).
 * esbuild binds a named import of a Node module to one `require("node:...")` whose names are read
 * where they are used (`(0, import_node_tls.connect)(...)`), which is what makes this safe; a
 * default or namespace import (`__toESM(require(...))`) would read every name at once, so the build
 * refuses one of these modules imported that way rather than load it at start unseen.
 */
export const LAZY_BUILTINS = ['node:http', 'node:https', 'node:http2', 'node:tls', 'node:dns/promises'];

/** The bundle's text with each of LAZY_BUILTINS bound to its stand-in (`__procctlLazy`, in the wrapper). */
function lazyBuiltins(text) {
  // bin/procctld reads the bundle as latin1 (one byte a character, no decoding): esbuild writes ASCII by default.
  if (/[^\x00-\x7f]/.test(text)) throw new Error('bundle-daemon: the bundle holds a character outside ASCII; bin/procctld reads it as latin1: keep esbuild\'s charset ascii');
  let out = text;
  for (const id of LAZY_BUILTINS) {
    const req = `require(${JSON.stringify(id)})`;
    if (out.includes(`__toESM(${req}`)) throw new Error(`bundle-daemon: ${id} is imported whole (a default or namespace import) somewhere in the daemon; import the names it uses ({ name } from '${id}') so it can load at first use`);
    out = out.replaceAll(req, `__procctlLazy(${JSON.stringify(id)})`);
  }
  return out;
}

/**
 * The bundle carries its own CommonJS wrapper: bin/procctld compiles the file's text as it is read,
 * where wrapping it there made V8 copy the whole text (1.7 MB of fresh memory) before compiling.
 * `__procctlLazy(id)` is the stand-in for a Node module loaded at first use (LAZY_BUILTINS).
 */
const WRAPPER_START = [
  '(function (exports, require, module, __filename, __dirname) {',
  "const __procctlUrlOf = (rel) => require('node:url').pathToFileURL(require('node:path').join(__dirname, rel)).href;",
  'const __procctlLazy = (id) => { let m; const load = () => (m ??= require(id)); return new Proxy({}, { get: (_, k) => load()[k], has: (_, k) => k in load(), ownKeys: () => Reflect.ownKeys(load()), getOwnPropertyDescriptor: (_, k) => { const d = Reflect.getOwnPropertyDescriptor(load(), k); return d && { ...d, configurable: true }; } }); };',
].join('\n');
const WRAPPER_END = '\n})';

const result = await build({
  ...bundleOptions(ENTRY, BUNDLE),
  plugins: [outsidePackages, ownUrl],
  // Smaller to read and hash, names kept (stack traces and logs read as the sources).
  minifyWhitespace: true,
  minifySyntax: true,
  banner: { js: WRAPPER_START },
  footer: { js: WRAPPER_END },
});

const inside = Object.keys(result.metafile.inputs);
rmSync(`${BUNDLE}.cache`, { force: true });
rmSync(STAMP, { force: true });
replace(BUNDLE, lazyBuiltins(result.outputFiles[0].text));
const stamped = writeStamp(inside);
const cached = await writeCodeCache();
process.stdout.write(`bundled ${inside.length} modules (${stamped} of dist/) into ${relative(ROOT, BUNDLE)} (${Math.round(result.outputFiles[0].text.length / 1024)} KiB) ${cached ? 'with' : 'without'} its code cache\n`);
