import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../helpers/daemon.js';

// The install step runs in a copy: `node-gyp rebuild` would first clean the real build/.
const dir = mkdtempSync(join(tmpdir(), 'procctl-build-addon-'));
for (const part of ['scripts', 'native', 'binding.gyp']) cpSync(join(ROOT, part), join(dir, part), { recursive: true });
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function install(env: NodeJS.ProcessEnv) {
  return spawnSync(process.execPath, [join(dir, 'scripts', 'build-addon.mjs')], { cwd: dir, env, encoding: 'utf8', timeout: 60_000 });
}

describe('the install step without a toolchain', () => {
  it('names the missing compiler, says what to install and that jobs still start, and exits 0', () => {
    const r = install({ ...process.env, CC: '/nonexistent/cc', CXX: '/nonexistent/g++' });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('procctl: the native spawner (build/Release/procctl.node) was not built');
    expect(r.stderr).toContain('missing a C compiler (/nonexistent/cc), a C++ compiler to link with (/nonexistent/g++)');
    expect(r.stderr).toContain('apt-get install -y python3 make g++');
    expect(r.stderr).toContain("start through Node's child_process");
    expect(existsSync(join(dir, 'build'))).toBe(false);
  });

  it('names every tool missing from PATH', () => {
    const empty = join(dir, 'empty-path');
    mkdirSync(empty, { recursive: true });
    const env: NodeJS.ProcessEnv = { ...process.env, PATH: empty };
    for (const k of ['CC', 'CXX', 'MAKE', 'PYTHON', 'NODE_GYP_FORCE_PYTHON', 'npm_config_python']) delete env[k];
    const r = install(env);
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('missing python3, make, a C compiler (cc), a C++ compiler to link with (g++)');
  });
});

describe('a rebuild that fails', () => {
  it('puts back the addons built before it (node-gyp rebuild starts by deleting build/)', () => {
    const release = join(ROOT, 'build', 'Release');
    const addons = ['procctl.node'].filter((f) => existsSync(join(release, f)));
    if (addons.length === 0) {
      console.log('skipped: no addon was built in this checkout to keep');
      return;
    }
    const target = join(dir, 'build', 'Release');
    mkdirSync(target, { recursive: true });
    for (const f of addons) cpSync(join(release, f), join(target, f));
    // Headers that are not there: node-gyp fails at configure, after its clean, without going online.
    const r = install({ ...process.env, npm_config_nodedir: join(dir, 'no-node-headers') });
    expect(r.status).toBe(0);
    expect(r.stderr).toContain('node-gyp failed');
    expect(r.stderr).toContain('kept the addons built before');
    for (const f of addons) expect(readFileSync(join(target, f)).equals(readFileSync(join(release, f))), f).toBe(true);
    rmSync(join(dir, 'build'), { recursive: true, force: true });
  });
});

// A package carries the addon prebuilt (scripts/prebuild-addon.mjs at pack time): the install
// step then compiles nothing, and needs no compiler.
describe('the install step in a package with a prebuilt addon', () => {
  it('uses the prebuild that loads here and builds nothing, even without a toolchain', () => {
    const release = join(ROOT, 'build', 'Release', 'procctl.node');
    if (!existsSync(release)) {
      console.log('skipped: no addon was built in this checkout to stand in for the prebuild');
      return;
    }
    const pkg = mkdtempSync(join(tmpdir(), 'procctl-prebuilt-'));
    try {
      for (const part of ['scripts', 'native', 'binding.gyp', 'package.json']) cpSync(join(ROOT, part), join(pkg, part), { recursive: true });
      symlinkSync(join(ROOT, 'node_modules'), join(pkg, 'node_modules'));
      const prebuilds = join(pkg, 'prebuilds', `${process.platform}-${process.arch}`);
      mkdirSync(prebuilds, { recursive: true });
      cpSync(release, join(prebuilds, 'procctl.napi.glibc.node'));
      const r = spawnSync(process.execPath, [join(pkg, 'scripts', 'build-addon.mjs')], {
        cwd: pkg,
        env: { ...process.env, CC: '/nonexistent/cc', CXX: '/nonexistent/g++' },
        encoding: 'utf8',
        timeout: 60_000,
      });
      expect(r.status, r.stderr).toBe(0);
      expect(r.stdout).toContain(`using the prebuilt addon prebuilds/${process.platform}-${process.arch}/procctl.napi.glibc.node`);
      expect(r.stderr).toBe('');
      expect(existsSync(join(pkg, 'build'))).toBe(false);
    } finally {
      rmSync(pkg, { recursive: true, force: true });
    }
  });
});
