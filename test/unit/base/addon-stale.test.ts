import { appendFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT } from '../../helpers/daemon.js';

// A package of its own: addon.ts finds its root by package.json, and the addon and native/ beside it.
const dir = mkdtempSync(join(tmpdir(), 'procctl-addon-stale-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const built = join(ROOT, 'build', 'Release', 'procctl.node');

async function freshCopy(name: string) {
  const root = join(dir, name);
  mkdirSync(root, { recursive: true });
  writeFileSync(join(root, 'package.json'), JSON.stringify({ name: 'procctl' }));
  cpSync(join(ROOT, 'native'), join(root, 'native'), { recursive: true });
  cpSync(built, join(root, 'build', 'Release', 'procctl.node'));
  cpSync(join(ROOT, 'src', 'base', 'addon.ts'), join(root, 'src', 'base', 'addon.ts'));
  return root;
}

async function load(root: string) {
  const mod = (await import(join(root, 'src', 'base', 'addon.ts'))) as typeof import('../../../src/base/addon.js');
  expect(mod.loadAddon(['spawn'])).not.toBeInstanceOf(Error);
  return mod;
}

describe.skipIf(!existsSync(built))('an addon built from other sources than those beside it', () => {
  it('is not said when the build matches native/', async () => {
    const mod = await load(await freshCopy('same'));
    expect(mod.addonStale()).toBeUndefined();
  });

  it('is said, naming the build, both hashes and the command that rebuilds it', async () => {
    const root = await freshCopy('moved-on');
    appendFileSync(join(root, 'native', 'keep.c'), '\n// a change made after the build\n');
    const mod = await load(root);
    const said = mod.addonStale();
    expect(said).toMatch(/^build\/Release\/procctl\.node was built from sources [0-9a-f]{16}, but native\/ now holds [0-9a-f]{16}: run `node scripts\/build-addon\.mjs` in /);
    expect(said).toContain(root);
  });
});
