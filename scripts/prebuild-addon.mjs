#!/usr/bin/env node
// The `prepack` step: build the addon (native/*.c) into prebuilds/<platform>-<arch>/, which the
// package ships, so that an install needs no compiler and no install script: node-gyp-build
// finds it (src/runner/built.ts), and scripts/build-addon.mjs compiles only where it does not
// load. It builds in a copy, leaving the checkout's build/ alone, and fails the pack when the
// build fails: a package without its prebuild would compile, or fork, on every host.
import { spawnSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { arch, platform, tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
// N-API: one file serves every Node from 20 on. glibc: node-gyp-build will not offer it on musl.
const NAME = 'procctl.napi.glibc.node';
const target = join(ROOT, 'prebuilds', `${platform()}-${arch()}`);

if (platform() !== 'linux' || arch() !== 'x64') {
  process.stderr.write(`prebuild-addon: building for ${platform()}-${arch()}; the package is meant to carry linux-x64, so pack it on such a host as well\n`);
}
const dir = mkdtempSync(join(tmpdir(), 'procctl-prebuild-'));
try {
  for (const part of ['binding.gyp', 'native', join('scripts', 'build-addon.mjs')]) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
  const run = spawnSync(process.execPath, [join(dir, 'scripts', 'build-addon.mjs')], {
    cwd: dir,
    env: { ...process.env, PROCCTL_BUILD_ADDON: '1' },
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const built = join(dir, 'build', 'Release', 'procctl.node');
  if (!existsSync(built)) {
    process.stderr.write(`${run.stdout ?? ''}${run.stderr ?? ''}prebuild-addon: the addon did not build, so the package would ship without it; fix the above and pack again\n`);
    process.exit(1);
  }
  rmSync(join(ROOT, 'prebuilds'), { recursive: true, force: true });
  mkdirSync(target, { recursive: true });
  copyFileSync(built, join(target, NAME));
  process.stdout.write(`prebuild-addon: ${relative(ROOT, join(target, NAME))}\n`);
} finally {
  rmSync(dir, { recursive: true, force: true });
}
