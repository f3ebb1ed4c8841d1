#!/usr/bin/env node
// The `install` step: make sure the project's addon (native/*.c) loads here. A package carries it
// prebuilt (prebuilds/<platform>-<arch>/, scripts/prebuild-addon.mjs); when that one loads there
// is nothing to do, and an install that runs no scripts at all works the same. Else (another
// platform, another libc, a checkout) it is built with node-gyp. It never fails the install:
// without the addon the daemon starts jobs on pipes through Node's child_process (a fork of the
// daemon) and says so in `daemon.status` and its log. See docs/architecture.md.
import { spawnSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { accessSync, constants, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const ADDON = join('build', 'Release', 'procctl.node');
const DEBIAN = 'apt-get install -y python3 make g++';
const env = process.env;

/** `cmd` as a path, or the first executable of that name on PATH. */
function which(cmd) {
  const executable = (file) => {
    try {
      accessSync(file, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (cmd.includes('/')) return executable(cmd) ? cmd : undefined;
  return (env.PATH ?? '').split(delimiter).filter(Boolean).map((dir) => join(dir, cmd)).find(executable);
}

/** The program a make variable names (`CC="ccache gcc"` runs ccache), or make's default. */
const program = (value, fallback) => value?.trim().split(/\s+/)[0] || fallback;

/** What node-gyp needs, as it looks for it; the ones this machine lacks. */
function missingTools() {
  const missing = [];
  const python = [env.NODE_GYP_FORCE_PYTHON, env.npm_config_python, env.PYTHON].filter(Boolean);
  if (![...python, 'python3', 'python'].some(which)) missing.push('python3');
  const make = program(env.MAKE, 'make');
  if (!which(make)) missing.push(make === 'make' ? 'make' : `make (${make})`);
  // gyp compiles C with $CC (make's default: cc) and links with $CXX (make's default: g++).
  const cc = program(env.CC, 'cc');
  if (!which(cc)) missing.push(`a C compiler (${cc})`);
  const cxx = program(env.CXX, 'g++');
  if (!which(cxx)) missing.push(`a C++ compiler to link with (${cxx})`);
  return missing;
}

/** node-gyp: the copy npm hands its install scripts, else npm's own beside this node, else PATH. */
function nodeGyp() {
  const bundled = join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js');
  for (const js of [env.npm_config_node_gyp, bundled]) if (js && existsSync(js)) return [process.execPath, [js]];
  const bin = which('node-gyp');
  return bin ? [bin, []] : undefined;
}

/** Copies of the addons already built (build/Release/*.node), to put back when a rebuild fails. */
function keepBuilt() {
  const release = join(ROOT, 'build', 'Release');
  const built = existsSync(release) ? readdirSync(release).filter((f) => f.endsWith('.node')) : [];
  if (built.length === 0) return undefined;
  const dir = mkdtempSync(join(tmpdir(), 'procctl-addon-'));
  for (const f of built) copyFileSync(join(release, f), join(dir, f));
  const discard = () => rmSync(dir, { recursive: true, force: true });
  return {
    discard,
    restore() {
      try {
        mkdirSync(release, { recursive: true });
        for (const f of built) copyFileSync(join(dir, f), join(release, f));
        return true;
      } catch {
        return false;
      } finally {
        discard();
      }
    },
  };
}

function explain(problem, lines) {
  const text = [
    '',
    `procctl: the native spawner (${ADDON}) was not built: ${problem}.`,
    ...lines.map((l) => `  ${l}`),
    '  Without it procctl still works: jobs on pipes start through Node\'s child_process, which',
    '  forks the daemon, so each start costs more as the daemon grows. `procctl status` shows',
    '  which spawner is in use. After fixing the above, build it with',
    `  \`node scripts/build-addon.mjs\` in ${ROOT} and restart the daemon.`,
    '',
  ];
  process.stderr.write(text.join('\n') + '\n');
}

/** The prebuilt addon the package ships for this platform, when it loads here; else undefined. */
function loadablePrebuild() {
  if (env.PROCCTL_BUILD_ADDON === '1') return undefined;
  const require = createRequire(import.meta.url);
  try {
    const file = require('node-gyp-build').resolve(ROOT);
    if (!file.includes(`${join('prebuilds', '')}`)) return undefined;
    return typeof require(file).spawn === 'function' ? file : undefined;
  } catch {
    return undefined;
  }
}

function main() {
  const prebuild = loadablePrebuild();
  if (prebuild) {
    process.stdout.write(`procctl: using the prebuilt addon ${prebuild.slice(ROOT.length + 1)}\n`);
    return;
  }
  const missing = missingTools();
  if (missing.length > 0) {
    explain(`missing ${missing.join(', ')}`, [`On Debian or Ubuntu: ${DEBIAN}`, 'Elsewhere: Python 3, make and a C/C++ compiler (gcc and g++, or clang with CC and CXX set).']);
    return;
  }
  const gyp = nodeGyp();
  if (!gyp) {
    explain('node-gyp was not found', ['It comes with npm: run the install through npm (`npm ci`), or `npm install -g node-gyp`.']);
    return;
  }
  const [file, args] = gyp;
  // `rebuild` starts by deleting build/: keep the addons built before, so that a rebuild that
  // fails (offline, no headers) leaves the working ones in place. They are N-API: any Node 20+ loads them.
  const kept = keepBuilt();
  // The running Node's own headers when it has them (official builds and Debian's nodejs-dev do):
  // they match it exactly, and node-gyp then needs no download.
  const prefix = resolve(dirname(process.execPath), '..');
  const nodedir = !env.npm_config_nodedir && existsSync(join(prefix, 'include', 'node', 'node_api.h')) ? [`--nodedir=${prefix}`] : [];
  const run = spawnSync(file, [...args, 'rebuild', ...nodedir], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 << 20 });
  const output = `${run.stdout ?? ''}${run.stderr ?? ''}`;
  if (run.status === 0 && existsSync(join(ROOT, ADDON))) {
    kept?.discard();
    process.stdout.write(`procctl: built ${ADDON}\n`);
    return;
  }
  if (kept?.restore()) {
    const last = output.trimEnd().split('\n').slice(-5).map((l) => `  | ${l}\n`).join('');
    process.stderr.write(`procctl: node-gyp failed (exit ${run.status ?? run.signal}); kept the addons built before (${ADDON} and the rest), which still work.\n${last}`);
    return;
  }
  const tail = output.trimEnd().split('\n').slice(-15);
  // Headers that were never downloaded (offline), or a nodedir without them.
  const headers = /network connectivity|ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|getaddrinfo|node_api\.h: No such file|common\.gypi not found|No such file or directory: .*common\.gypi/i.test(output);
  explain(
    run.error ? `node-gyp could not be run (${run.error.message})` : `node-gyp failed (exit ${run.status ?? run.signal})`,
    [
      ...(headers
        ? [
            'node-gyp could not get Node\'s C headers: it downloads them for the running Node unless',
            'told where they are. Offline, name a Node install that has include/node/node_api.h, e.g.',
            `\`npm_config_nodedir=${resolve(dirname(process.execPath), '..')} node scripts/build-addon.mjs\`,`,
            'or install your distribution\'s Node development package.',
          ]
        : [`Check the toolchain (on Debian or Ubuntu: ${DEBIAN}).`]),
      'The last lines node-gyp printed:',
      ...tail.map((l) => `  | ${l}`),
    ],
  );
}

try {
  main();
} catch (err) {
  explain(`the build script failed (${err?.message ?? err})`, []);
}
process.exit(0);
