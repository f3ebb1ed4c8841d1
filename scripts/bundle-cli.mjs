#!/usr/bin/env node
// The one-file CLI: bundles the compiled CLI (dist/src/cli/main.js and the commands it loads)
// into dist/src/cli/procctl.cjs with a V8 code cache beside it (procctl.cjs.cache), so that
// `procctl ps` reads two files instead of some sixty modules and compiles almost nothing: most
// of what a Node CLI costs over `node -e 0` is finding, reading and compiling modules.
// bin/procctl runs it when its stamp matches the compiled sources (see writeStamp), else those.
// `npm run build` runs this after tsc. docs/benchmarks.md ("CLI start-up") has the figures behind each choice.
//
// What a command loads with import() beyond its own file (the daemon, the MCP SDK, the console, ssh) stays
// outside, loaded from dist/ when that command runs; the build fails if zod, pino, the MCP SDK or
// OpenTelemetry end up inside, since every command would then pay for them at start-up.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { bundleOptions, replace, ROOT } from './bundle-support.mjs';

const CLI = join(ROOT, 'dist', 'src', 'cli');
const ENTRY = join(CLI, 'main.js');
export const BUNDLE = join(CLI, 'procctl.cjs');
export const STAMP = join(CLI, 'procctl.cjs.json');
const FORBIDDEN = [/node_modules\/zod\//, /node_modules\/pino\//, /node_modules\/@modelcontextprotocol\//, /node_modules\/@opentelemetry\//];

/**
 * What the daemon and the MCP server are made of (zod, pino, the MCP SDK) is loaded by the two
 * commands that run them, from dist/, with import(): it stays outside the bundle. Everything
 * else a command imports, even lazily (ssh for --host), is inside, so it shares the bundle's
 * classes (an error from ssh is the client's own DaemonUnreachableError). The outside imports go
 * through `__procctlImport`, which bin/procctl passes in: a script compiled with a code cache
 * loses node's own import() callback (ERR_VM_DYNAMIC_IMPORT_CALLBACK_MISSING).
 */
const OUTSIDE = [join(ROOT, 'dist', 'src', 'daemon') + '/', join(ROOT, 'dist', 'src', 'mcp') + '/', join(ROOT, 'dist', 'src', 'console') + '/'];
const outside = new Set();
const lazyOutside = {
  name: 'lazy-outside',
  setup(b) {
    b.onResolve({ filter: /^\./, namespace: 'file' }, (args) => {
      if (args.kind !== 'dynamic-import') return undefined;
      const target = resolve(dirname(args.importer), args.path);
      if (!OUTSIDE.some((dir) => target.startsWith(dir))) return undefined;
      const path = relative(CLI, target);
      const spec = path.startsWith('.') ? path : `./${path}`;
      outside.add(spec);
      return { path: spec, external: true };
    });
  },
};

/** The bundle's text with each outside import() calling `__procctlImport`; every one must be found. */
function routeOutsideImports(text) {
  let routed = text;
  for (const spec of outside) {
    const call = `import(${JSON.stringify(spec)})`;
    if (!routed.includes(call)) throw new Error(`bundle-cli: cannot find ${call} in the bundle`);
    routed = routed.replaceAll(call, `__procctlImport(${JSON.stringify(spec)})`);
  }
  if (/\bimport\(/.test(routed.replaceAll('__procctlImport(', ''))) throw new Error('bundle-cli: an import() is left in the bundle');
  return routed;
}

/**
 * Two of the libraries load more than the CLI uses, at every start: json-rpc-2.0's index loads its
 * server half too, and commander loads child_process (with dgram) for subcommands run as separate
 * executables, which procctl has none of. The bundle takes the client half alone, and gives
 * commander a child_process that loads the real one on first use.
 */
const leaner = {
  name: 'leaner',
  setup(b) {
    b.onResolve({ filter: /^json-rpc-2\.0$/ }, () => ({ path: 'json-rpc-2.0', namespace: 'leaner' }));
    b.onResolve({ filter: /^node:child_process$/ }, (args) =>
      args.importer.includes('/node_modules/commander/') ? { path: 'child_process', namespace: 'leaner' } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: 'leaner' }, (args) =>
      args.path === 'json-rpc-2.0'
        ? {
            contents: "export { JSONRPCClient } from 'json-rpc-2.0/dist/client.js';\nexport { JSONRPCErrorException } from 'json-rpc-2.0/dist/models.js';\n",
            resolveDir: ROOT,
          }
        : { contents: "module.exports = { spawn: (...args) => require('node:child_process').spawn(...args) };\n", loader: 'js' },
    );
  },
};

/**
 * The stamp that tells bin/procctl the bundle is current, never file times (an install from a
 * tarball sets those as it unpacks): the hash of every file the bundle was made from, written
 * into procctl.cjs.json beside it and as the last line of the compiled main.js. tsc rewrites
 * main.js whenever it emits, which drops that line, so after a bare `tsc` the two differ and
 * bin/procctl runs the compiled sources; an installed package, which nothing recompiles, keeps
 * them equal. Checking costs two small reads, no hashing at start-up.
 */
function writeStamp(inputs) {
  const hash = createHash('sha256');
  // A virtual module (`leaner:…`) is made by this script, which is hashed with the rest.
  const scripts = [fileURLToPath(import.meta.url), join(dirname(fileURLToPath(import.meta.url)), 'bundle-support.mjs')].map((f) => relative(ROOT, f));
  const files = [...inputs.filter((f) => !/^[a-z]+:/.test(f)), ...scripts].sort();
  for (const file of files) hash.update(`${file}\0`).update(readFileSync(join(ROOT, file))).update('\0');
  const sources = hash.digest('hex');
  const main = readFileSync(ENTRY, 'utf8').replace(/\n\/\/# procctl-bundle [0-9a-f]+\n$/, '\n');
  replace(ENTRY, `${main.endsWith('\n') ? main : `${main}\n`}//# procctl-bundle ${sources}\n`);
  replace(STAMP, `${JSON.stringify({ sources, files: inputs.length }, null, 2)}\n`);
  return sources;
}

/**
 * The code cache: bin/procctl run once as `procctl ps --json` against a stand-in daemon that
 * answers every request with an empty list, so the cache holds what that path compiles.
 */
async function writeCodeCache() {
  const dir = mkdtempSync(join(tmpdir(), 'procctl-bundle-'));
  const socket = join(dir, 'stand-in.sock');
  const server = createServer((conn) => {
    let buffered = '';
    conn.setEncoding('utf8').on('data', (chunk) => {
      buffered += chunk;
      for (let nl = buffered.indexOf('\n'); nl >= 0; nl = buffered.indexOf('\n')) {
        const { id } = JSON.parse(buffered.slice(0, nl));
        buffered = buffered.slice(nl + 1);
        conn.write(`${JSON.stringify({ jsonrpc: '2.0', id, result: { sessions: [], total: 0, offset: 0, text: 'No sessions.' } })}\n`);
      }
    });
  });
  await new Promise((ok) => server.listen(socket, ok));
  try {
    const child = spawn(process.execPath, [join(ROOT, 'bin', 'procctl'), '--socket', socket, 'ps', '--json'], {
      env: { ...process.env, PROCCTL_WRITE_CODE_CACHE: '1' },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    const code = await new Promise((ok) => child.on('exit', ok));
    if (code !== 0) throw new Error(`bundle-cli: the bundled \`procctl ps --json\` exited ${code}`);
  } finally {
    server.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const result = await build({
  ...bundleOptions(ENTRY, BUNDLE),
  // The optional native modules are loaded with require() where they are used.
  external: ['@lydell/node-pty'],
  plugins: [lazyOutside, leaner],
  // The bundle sits where main.js does, so a URL relative to a module (package.json) means the same.
  banner: { js: "const __procctlUrl = require('node:url').pathToFileURL(__filename).href;" },
  define: { 'import.meta.url': '__procctlUrl', 'import.meta.dirname': '__dirname' },
});

const inside = Object.keys(result.metafile.inputs);
const heavy = inside.filter((f) => FORBIDDEN.some((re) => re.test(f)));
if (heavy.length) {
  process.stderr.write(`bundle-cli: these would load with every command; reach them with import() where they are needed:\n  ${heavy.join('\n  ')}\n`);
  process.exit(1);
}
const text = routeOutsideImports(result.outputFiles[0].text);
rmSync(`${BUNDLE}.cache`, { force: true });
rmSync(STAMP, { force: true });
replace(BUNDLE, text);
writeStamp(inside);
await writeCodeCache();
process.stdout.write(`bundled ${inside.length} modules into ${relative(ROOT, BUNDLE)} (${Math.round(text.length / 1024)} KiB) with its code cache\n`);
